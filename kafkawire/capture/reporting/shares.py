"""Share groups (KIP-932) as a capture shows them, for the report: per group and record, which members
acquired it, how it was acknowledged, its redeliveries and lock expiries, and whether it was archived.

Both report engines select the rows of the ``share_acquisitions`` and ``share_acknowledgements``
tables (``ACQUISITION_COLUMNS``, ``ACKNOWLEDGEMENT_COLUMNS``, ``ts`` in microseconds); ``share_view``
replays them record by record in capture order, through the states Kafka's ``SharePartition`` keeps:

- a ShareFetch response's AcquiredRecords range acquires each record of it for the request's member,
  with the range's delivery count; a record acquired again with no acknowledgement in between counts a
  *lock expiry* (its acquisition lock ran out, or its holder left the group and released it);
- an acknowledgement (of a ShareFetch or ShareAcknowledge request, answered without error for its
  partition) ACCEPTs, RELEASEs (available again), REJECTs (archived) or RENEWs (still acquired) each
  record of its range; GAP marks an offset with no record;
- a record released, or whose lock expired before the capture's end, at the delivery limit is archived
  (``delivery_limit``): Kafka's ``group.share.delivery.count.limit``, which no frame carries, so the
  report takes it as a parameter (``DEFAULT_DELIVERY_LIMIT``, Kafka's default, otherwise).

Acknowledgements count at their request's time, acquisitions at their response's (a ShareFetch's
piggybacked acknowledgements are applied before it acquires). A range of more than ``MAX_RANGE``
offsets (Kafka bounds a share partition's in-flight records far below) is left out, as a problem of
kind ``share_range_too_wide``.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["ACQUISITION_COLUMNS", "ACKNOWLEDGEMENT_COLUMNS", "DEFAULT_DELIVERY_LIMIT", "MAX_RANGE",
           "TOO_WIDE", "share_view"]

ACQUISITION_COLUMNS = ("ts", "group_id", "member_id", "topic", "topic_id", "partition", "first_offset",
                       "last_offset", "delivery_count", "acquisition_lock_timeout_ms")
ACKNOWLEDGEMENT_COLUMNS = ("ts", "group_id", "member_id", "topic", "topic_id", "partition", "first_offset",
                           "last_offset", "acknowledge_type", "error_code")
DEFAULT_DELIVERY_LIMIT = 5  # group.share.delivery.count.limit's default
MAX_RANGE = 1 << 16
TOO_WIDE = "share_range_too_wide"
ACQUIRED, AVAILABLE, ACKNOWLEDGED, ARCHIVED = "acquired", "available", "acknowledged", "archived"
REJECTED, DELIVERY_LIMIT = "rejected", "delivery_limit"


@dataclass
class _Record:
    members: list[str] = field(default_factory=list)  # "" for a request that named none
    deliveries: int = 0
    acknowledgements: list[str | None] = field(default_factory=list)
    redeliveries: int = 0
    lock_expiries: int = 0
    state: str = AVAILABLE
    archived: str | None = None
    locked_until: int | None = None  # capture time (us) its lock runs out, None where unknown
    lock_us: int | None = None       # the acquisition lock's duration (the response's timeout)


def share_view(acquisitions: Iterable[dict], acknowledgements: Iterable[dict], end: int | None,
               delivery_limit: int = DEFAULT_DELIVERY_LIMIT) -> tuple[list[dict], list[dict], list[dict]]:
    """(groups, records, problems) from rows of the two tables; ``end`` is the capture's last time (us).

    records: one per group, topic (its name, else its id), partition and offset acquired or
    acknowledged: ``members`` that acquired it in order, ``deliveries`` (its highest delivery count),
    ``acknowledgements`` (the types that took effect, in order), ``redeliveries`` (acquisitions with a
    delivery count above 1), ``lock_expiries``, ``state`` at the capture's end and ``archived``
    (``rejected``, ``delivery_limit`` or None). groups: one per group, the records' sums."""
    events: list[tuple] = []
    problems: list[dict] = []
    for row in acquisitions:
        if _wide(row, problems, "acquired"):
            continue
        lock = row["acquisition_lock_timeout_ms"]
        events.append((row["ts"], 1, _key(row), row["first_offset"], row["last_offset"], row["member_id"] or "",
                       row["delivery_count"], lock if lock is not None and lock >= 0 else -1))
    for row in acknowledgements:
        if row["error_code"] != 0 or _wide(row, problems, "acknowledged"):
            continue  # refused or not answered: it took no effect the capture shows
        events.append((row["ts"], 0, _key(row), row["first_offset"], row["last_offset"], row["member_id"] or "",
                       row["acknowledge_type"] or "", 0))
    records: dict[tuple, _Record] = {}
    for ts, kind, key, first, last, member, value, lock in sorted(events):
        for offset in range(first, last + 1):
            record = records.setdefault((*key, offset), _Record())
            if kind:
                _acquire(record, member, value, ts, None if lock < 0 else lock * 1000)
            else:
                _acknowledge(record, value, ts, delivery_limit)
    rows = []
    for (group, topic, partition, offset), record in sorted(records.items()):
        if record.state == ACQUIRED and end is not None and record.locked_until is not None \
                and end >= record.locked_until:
            _released(record, delivery_limit)  # its lock ran out within the capture
        rows.append(dict(group=group or None, topic=topic or None, partition=partition, offset=offset,
                         members=[member or None for member in record.members],
                         deliveries=record.deliveries, acknowledgements=record.acknowledgements,
                         redeliveries=record.redeliveries, lock_expiries=record.lock_expiries, state=record.state,
                         archived=record.archived))
    return _groups(rows), rows, problems


def _key(row: dict) -> tuple:
    topic = row["topic"] if row["topic"] is not None else row["topic_id"]
    return (row["group_id"] or "", topic or "", row["partition"])


def _wide(row: dict, problems: list[dict], what: str) -> bool:
    first, last = row["first_offset"], row["last_offset"]
    if 0 <= last - first < MAX_RANGE:
        return False
    if last >= first:
        problems.append(dict(kind=TOO_WIDE, ts=row["ts"], reason=(
            f"group {row['group_id']!r}: offsets {first}-{last} of {row['topic'] or row['topic_id']}-"
            f"{row['partition']} {what} in one range of more than {MAX_RANGE:,} (left out)")))
    return True  # (a range that ends before it starts holds no record)


def _acquire(record: _Record, member: str, delivery_count: int, ts: int, lock_us: int | None) -> None:
    if record.state == ACQUIRED:
        record.lock_expiries += 1
    if member not in record.members:
        record.members.append(member)
    record.deliveries = max(record.deliveries, delivery_count)
    record.redeliveries += delivery_count > 1
    record.state, record.archived, record.lock_us = ACQUIRED, None, lock_us
    record.locked_until = None if lock_us is None else ts + lock_us


def _acknowledge(record: _Record, kind: str, ts: int, delivery_limit: int) -> None:
    if kind == "RENEW":
        if record.state == ACQUIRED and record.lock_us is not None:
            record.locked_until = ts + record.lock_us  # locked again for a lock duration from here
        return
    record.acknowledgements.append(kind or None)
    if kind == "REJECT":
        record.state, record.archived = ARCHIVED, REJECTED
    elif kind == "RELEASE":
        _released(record, delivery_limit)
    else:  # ACCEPT, GAP
        record.state = ACKNOWLEDGED


def _released(record: _Record, delivery_limit: int) -> None:
    if record.deliveries >= delivery_limit:
        record.state, record.archived = ARCHIVED, DELIVERY_LIMIT
    else:
        record.state = AVAILABLE


def _groups(records: list[dict]) -> list[dict]:
    groups: dict[str, dict] = {}
    members: dict[str, set] = {}
    for row in records:
        group = groups.setdefault(row["group"], dict(
            group=row["group"], members=0, records=0, accepted=0, released=0, rejected=0, redelivered=0,
            lock_expiries=0, delivery_limit=0, acquired=0))
        members.setdefault(row["group"], set()).update(row["members"])
        group["records"] += 1
        group["accepted"] += row["acknowledgements"][-1:] == ["ACCEPT"]
        group["released"] += row["acknowledgements"].count("RELEASE")
        group["rejected"] += row["archived"] == REJECTED
        group["redelivered"] += row["redeliveries"] > 0
        group["lock_expiries"] += row["lock_expiries"]
        group["delivery_limit"] += row["archived"] == DELIVERY_LIMIT
        group["acquired"] += row["state"] == ACQUIRED
    for name, group in groups.items():
        group["members"] = len(members[name])
    return list(groups.values())
