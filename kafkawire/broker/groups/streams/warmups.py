"""Warm-up tasks: a stateful task the assignor moves to a member whose process has not restored its
state is held back on the member running it, while the new owner restores the state as a warm-up
task; once the new owner reports it within ``acceptable.recovery.lag`` of the changelog's end, the
move completes. So the task keeps processing through the hand-over instead of stopping while a
fresh process replays its changelog (KIP-441's idea, as Kafka's streams ``AssignmentRefiner`` applies
it to the assignor's target). At most ``num.warmup.replicas`` warm-up tasks run at once.

Restore progress comes from the members' heartbeats: TaskOffsets (the changelog offsets a member has
restored, per task) and TaskEndOffsets (the changelog end offsets). A process with no report for a
task has not restored it.
"""
from __future__ import annotations

from collections.abc import Mapping

from .state import Member, Task, Tasks

__all__ = ["refine", "caught_up"]


def _end_offsets(members: Mapping[str, Member]) -> dict[Task, int]:
    ends: dict[Task, int] = {}
    for member in members.values():
        for subtopology, partition, offset in member.task_end_offsets:
            key = (subtopology, partition)
            ends[key] = max(ends.get(key, offset), offset)
    return ends


def caught_up(members: Mapping[str, Member], acceptable_lag: int) -> set[tuple[str, Task]]:
    """(process id, task) for the processes whose restored state of a task is within the lag."""
    ends = _end_offsets(members)
    ready = set()
    for member in members.values():
        for subtopology, partition, offset in member.task_offsets:
            task = (subtopology, partition)
            if task in ends and ends[task] - offset <= acceptable_lag:
                ready.add((member.process_id, task))
    return ready


def refine(target: dict[str, Tasks], members: Mapping[str, Member], stateful: set[str], num_warmups: int,
           acceptable_lag: int) -> dict[str, Tasks]:
    """The target with the moves of stateful tasks to processes not caught up held back (on the member
    running the task) behind warm-up tasks, at most ``num_warmups`` of them; a move without one waits
    for a later round, when the warm-ups before it have caught up."""
    if num_warmups <= 0:
        return target
    ready = caught_up(members, acceptable_lag)
    holder = {task: member_id for member_id, member in members.items() for task in member.assigned.active}
    active = {m: set(t.active) for m, t in target.items()}
    standby = {m: set(t.standby) for m, t in target.items()}
    warmup: dict[str, set[Task]] = {m: set() for m in target}
    budget = num_warmups
    for owner, tasks in sorted(target.items()):
        process = members[owner].process_id
        for task in sorted(tasks.active):
            current = holder.get(task)
            if (task[0] not in stateful or current is None or current == owner or current not in target
                    or members[current].process_id == process or (process, task) in ready):
                continue
            active[owner].discard(task)  # held back: it keeps running where it runs
            active[current].add(task)
            for member_id, member in members.items():  # no other copy beside the active in its process
                if member.process_id == members[current].process_id and member_id in standby:
                    standby[member_id].discard(task)
            restoring = any(task in standby[m] for m, member in members.items()
                            if member.process_id == process and m in standby)
            if not restoring and budget > 0:  # (a standby there restores it already)
                budget -= 1
                warmup[owner].add(task)
    return {m: Tasks(frozenset(active[m]), frozenset(standby[m]), frozenset(warmup[m])) for m in target}
