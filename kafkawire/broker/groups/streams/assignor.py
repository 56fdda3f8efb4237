"""The server-side task assignor of streams groups: sticky and balanced, as Kafka's ``StickyTaskAssignor``.

Active tasks first: a task stays with the member that had it while that member is under its share
(the total divided evenly, a few members taking one more), else goes to a member that had it as a
standby, else to the least loaded member of the least loaded process. Then, for each task of a
stateful subtopology, ``num.standby.replicas`` standby copies, each on a process that holds no other
copy of the task (previous holders first, then the least loaded), so a standby can take over when the
active's process goes away. With fewer processes than copies, fewer standbys are placed. Warm-up
tasks are not the assignor's (Kafka 4.3's places none): ``warmups`` refines its target.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .state import Task

__all__ = ["MemberSpec", "assign"]


@dataclass(frozen=True)
class MemberSpec:
    process_id: str
    active: frozenset[Task] = frozenset()  # what the member has now (its previous target)
    standby: frozenset[Task] = frozenset()


def assign(members: Mapping[str, MemberSpec], tasks: Mapping[str, int], stateful: set[str],
           num_standby_replicas: int) -> dict[str, tuple[set[Task], set[Task]]]:
    """member id -> (active tasks, standby tasks); ``tasks``: subtopology id -> task count; ``stateful``:
    the subtopologies with state (changelog topics), the only ones given standbys."""
    result: dict[str, tuple[set[Task], set[Task]]] = {m: (set(), set()) for m in members}
    if not members:
        return result
    all_tasks = [(sub, p) for sub in sorted(tasks) for p in range(tasks[sub])]
    # each member's share: the tasks divided evenly, the first ``extra`` members to fill up one more
    share, extra = divmod(len(all_tasks), len(members))
    load = dict.fromkeys(members, 0)
    process_load: dict[str, int] = dict.fromkeys((spec.process_id for spec in members.values()), 0)

    def give(member: str, task: Task, kind: int) -> None:
        result[member][kind].add(task)
        load[member] += 1
        process_load[members[member].process_id] += 1

    def has_room(member: str) -> bool:
        return load[member] < share or (load[member] == share and extra > 0)

    def give_active(member: str, task: Task) -> None:
        nonlocal extra
        if load[member] == share:
            extra -= 1
        give(member, task, 0)

    def least_loaded(candidates) -> str:
        return min(candidates, key=lambda m: (process_load[members[m].process_id], load[m], m))

    previous_active = {task: m for m, spec in sorted(members.items()) for task in spec.active}
    previous_standby: dict[Task, list[str]] = {}
    for m, spec in sorted(members.items()):
        for task in spec.standby:
            previous_standby.setdefault(task, []).append(m)
    unplaced = []
    for task in all_tasks:  # stickiness first, within the share
        owner = previous_active.get(task)
        if owner is not None and has_room(owner):
            give_active(owner, task)
        else:
            unplaced.append(task)
    for task in unplaced:
        warm = [m for m in previous_standby.get(task, ()) if has_room(m)]
        roomy = [m for m in members if has_room(m)] or list(members)
        give_active(least_loaded(warm or roomy), task)

    if num_standby_replicas > 0:
        active_process = {task: members[m].process_id for m, (active, _) in result.items() for task in active}
        for task in all_tasks:
            if task[0] not in stateful:
                continue
            holding = {active_process[task]}
            for _ in range(num_standby_replicas):
                candidates = [m for m in members if members[m].process_id not in holding]
                if not candidates:
                    break  # fewer processes than copies
                sticky = [m for m in previous_standby.get(task, ()) if m in candidates]
                chosen = sticky[0] if sticky else least_loaded(candidates)
                give(chosen, task, 1)
                holding.add(members[chosen].process_id)
    return result
