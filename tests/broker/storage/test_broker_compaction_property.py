"""Compaction against a model: random keys, values and tombstones from plain, idempotent and
transactional producers (some transactions aborted), segments rolled at random; after cleaning, a
read_committed consumer from the start sees exactly the latest committed value of each key at its
original offset, tombstones until delete.retention.ms has passed and not after, and each producer's
last batch is still there (its sequence numbers)."""
from __future__ import annotations

import tempfile
from pathlib import Path

from support.compaction_helpers import Writer, clean_fully, compacted_log, read_committed
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.database import InMemoryExampleDatabase

from kafkawire.broker.storage.cleaner import LogCleaner

KEYS = [b"k%d" % index for index in range(8)]
PLAIN, IDEMPOTENT, TRANSACTIONAL = -1, (11, 12), (21, 22)

records = st.lists(st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.binary(min_size=1, max_size=40))),
                   min_size=1, max_size=3)
operations = st.lists(st.one_of(
    st.tuples(st.just("plain"), records),
    st.tuples(st.just("idempotent"), st.sampled_from(IDEMPOTENT), records),
    st.tuples(st.just("txn"), st.sampled_from(TRANSACTIONAL), records),
    st.tuples(st.just("end"), st.sampled_from(TRANSACTIONAL), st.booleans()),
    st.tuples(st.just("roll")),
), min_size=1, max_size=60)


def _run(writer: Writer, ops) -> dict[bytes, tuple[int, bytes | None]]:
    """Apply the operations; the model is each key's latest committed (offset, value)."""
    latest: dict[bytes, tuple[int, bytes | None]] = {}
    pending: dict[int, list[tuple[int, bytes, bytes | None]]] = {}
    for op in ops:
        kind = op[0]
        if kind == "roll":
            writer.log.roll()
        elif kind == "end":
            if op[1] in writer.open:
                writer.end(op[1], op[2])
                ended = pending.pop(op[1], [])
                for offset, key, value in ended if op[2] else ():  # an abort's records count for nothing
                    if offset > latest.get(key, (-1, None))[0]:
                        latest[key] = (offset, value)
        else:
            producer = -1 if kind == "plain" else op[1]
            batch = op[-1]
            base = writer.append(batch, producer, transactional=kind == "txn")
            for delta, (key, value) in enumerate(batch):
                if kind == "txn":
                    pending.setdefault(producer, []).append((base + delta, key, value))
                else:
                    latest[key] = (base + delta, value)
    for producer in list(writer.open):  # everything ends: the cleaner may then reach the log end
        writer.end(producer, False)
    return latest


@settings(max_examples=60, deadline=None, database=InMemoryExampleDatabase(),
          suppress_health_check=[HealthCheck.too_slow])
@given(ops=operations, small_map=st.booleans(), segment_bytes=st.sampled_from([300, 1024, 100_000]))
def test_a_consumer_sees_the_latest_value_of_each_key_at_its_offset(ops, small_map, segment_bytes):
    clock = [1_000_000]
    with tempfile.TemporaryDirectory() as tmp:
        log = compacted_log(Path(tmp) / "t-0", clock, segment_bytes=segment_bytes)
        writer = Writer(log, clock)
        latest = _run(writer, ops)
        log.roll()
        end = log.log_end_offset
        before, _ = read_committed(log)
        # a map of ~3 keys forces rounds that stop short and go on from the checkpoint
        cleaner = LogCleaner(dedupe_buffer_size=400 if small_map else 1 << 20)
        checkpoint = clean_fully(log, cleaner, clock[0])
        assert checkpoint == end
        seen, batches = read_committed(log)
        expected = sorted((offset, key, value) for key, (offset, value) in latest.items())
        assert seen == expected, (before, seen)
        assert read_committed(log, committed=False)[0] == expected  # aborted records are gone, not hidden
        assert [base for base, *_ in batches] == sorted({base for base, *_ in batches})
        for producer, entry in log.producers.items():  # each producer's last batch keeps its sequence
            if entry.last_data_offset >= 0:
                assert any(last == entry.last_data_offset and pid == producer for _, last, pid, _, _ in batches)
        assert log.log_end_offset == end

        # past delete.retention.ms, a round (there must be something dirty) drops the tombstones
        clock[0] += log.config.delete_retention_ms + 1
        filler = writer.append([(b"filler", b"x")])
        log.roll()
        clean_fully(log, cleaner, clock[0], checkpoint)
        seen, batches = read_committed(log)
        expected = [(offset, key, value) for offset, key, value in expected if value is not None]
        assert seen == expected + [(filler, b"filler", b"x")]

        log.close()  # what was cleaned is what opens
        reopened = compacted_log(Path(tmp) / "t-0", clock, segment_bytes=segment_bytes)
        assert read_committed(reopened)[0] == seen
        reopened.close()
