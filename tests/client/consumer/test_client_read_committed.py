"""read_committed in the consumer's sans-IO fetcher: records of aborted transactions (the response's
AbortedTransactions with the ABORT markers, as Kafka's CompletedFetch reads them) and control batches
are skipped, and the position moves past them; read_uncommitted hands out every data record.

Responses are FetchResponse messages with real record batches, encoded and decoded at the request's
version; a property test checks the filter against a model of interleaved transactions."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkawire.client.core.consumer.config import ConsumerConfig
from kafkawire.client.core.consumer.fetcher import Fetcher, Leader
from kafkawire.client.core.topic_partition import TopicPartition
from kafkawire.messages import FetchResponse
from kafkawire.records import RecordBatchBuilder, iter_batches, transaction_marker_batch

NODE = 1
TP = TopicPartition("events", 0)


def data(base_offset: int, count: int, producer_id: int = -1, transactional: bool = False) -> bytes:
    builder = RecordBatchBuilder(base_offset=base_offset, producer_id=producer_id,
                                 producer_epoch=0 if producer_id >= 0 else -1,
                                 base_sequence=0 if producer_id >= 0 else -1, transactional=transactional)
    for i in range(count):
        builder.append(b"v%d" % (base_offset + i), timestamp=1000)
    return builder.build()


def marker(offset: int, producer_id: int, commit: bool) -> bytes:
    return transaction_marker_batch(commit, producer_id=producer_id, producer_epoch=0, coordinator_epoch=0,
                                    base_offset=offset)


def fetched(blob: bytes, aborted: list[tuple[int, int]], isolation: str, position: int = 0,
            max_poll_records: int = 500) -> tuple[list[int], int]:
    """The offsets ``poll`` hands out for one fetch of ``blob`` (with ``aborted``: (producer id, first
    offset)), and the position after."""
    fetcher = Fetcher(ConsumerConfig(isolation_level=isolation, max_poll_records=max_poll_records))
    fetcher.assign([TP])
    fetcher.seek(TP, position)
    fetcher.update_metadata({TP: Leader(NODE, 0)})
    fetcher.set_fetch_version(NODE, 12)
    (request, version), = fetcher.prepare_fetch_requests(0).values()
    assert request.isolation_level == (1 if isolation == "read_committed" else 0)
    message = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic=TP.topic, partitions=[
        FetchResponse.PartitionData(
            partition_index=0, high_watermark=10_000, last_stable_offset=10_000, log_start_offset=0, records=blob,
            aborted_transactions=[FetchResponse.AbortedTransaction(producer_id=p, first_offset=o) for p, o in aborted]
            if isolation == "read_committed" else None)])])
    body = message.encode(version)
    fetcher.handle_fetch_response(NODE, request, FetchResponse.decode(body, version, exact=True), version, len(body), 0)
    out: list[int] = []
    while True:
        records = fetcher.poll()
        if not records:
            break
        out += [r.offset for r in records]
    return out, fetcher.position(TP)


def interleaved() -> tuple[bytes, list[tuple[int, int]]]:
    """Producer 1 aborts [0, 1] and later commits [7]; producer 2 commits [2, 3]; [4] is plain."""
    blob = (data(0, 2, 1, True) + data(2, 2, 2, True) + data(4, 1) + marker(5, 1, commit=False)
            + marker(6, 2, commit=True) + data(7, 1, 1, True) + marker(8, 1, commit=True))
    return blob, [(1, 0)]


def test_read_committed_skips_aborted_records_and_markers_and_moves_past_them():
    blob, aborted = interleaved()
    assert fetched(blob, aborted, "read_committed") == ([2, 3, 4, 7], 9)


def test_read_uncommitted_hands_out_every_data_record():
    blob, aborted = interleaved()
    assert fetched(blob, aborted, "read_uncommitted") == ([0, 1, 2, 3, 4, 7], 9)


def test_a_fetch_of_only_an_aborted_transaction_hands_out_nothing_and_moves_the_position():
    blob = data(0, 3, 9, True) + marker(3, 9, commit=False)
    assert fetched(blob, [(9, 0)], "read_committed") == ([], 4)


def test_the_abort_marker_ends_a_producers_aborted_transaction():
    # producer 3 aborts [0], then commits [2]: only the first is in AbortedTransactions
    blob = data(0, 1, 3, True) + marker(1, 3, commit=False) + data(2, 1, 3, True) + marker(3, 3, commit=True)
    assert fetched(blob, [(3, 0)], "read_committed") == ([2], 4)


def test_a_position_inside_an_aborted_batch_still_skips_it():
    blob = data(0, 4, 5, True) + marker(4, 5, commit=False) + data(5, 1)
    assert fetched(blob, [(5, 0)], "read_committed", position=2) == ([5], 6)


@pytest.mark.parametrize("max_poll_records", [1, 2])
def test_small_polls_see_the_same_records(max_poll_records):
    blob, aborted = interleaved()
    assert fetched(blob, aborted, "read_committed", max_poll_records=max_poll_records) == ([2, 3, 4, 7], 9)


# ---- against a model ---------------------------------------------------------------------------------

# A step: (producer, kind) with kind "data" (a transactional batch of 1-3 records, opening the producer's
# transaction if none is open), "commit", "abort", or producer -1 "data" for a plain batch.
steps = st.lists(st.tuples(st.integers(-1, 3), st.sampled_from(["data", "data", "commit", "abort"])),
                 min_size=1, max_size=40)


@settings(max_examples=150, deadline=None)
@given(steps, st.data())
def test_read_committed_matches_a_model_of_interleaved_transactions(plan, draw):
    blob = b""
    offset = 0
    open_txns: dict[int, list[int]] = {}  # producer -> offsets written in its open transaction
    first_offset: dict[int, int] = {}
    aborted: list[tuple[int, int]] = []
    committed: list[int] = []
    everything: list[int] = []
    for producer, kind in plan:
        if producer < 0:
            if kind == "data":
                blob += data(offset, 1)
                committed.append(offset)
                everything.append(offset)
                offset += 1
            continue
        if kind == "data":
            count = draw.draw(st.integers(1, 3))
            blob += data(offset, count, producer, True)
            first_offset.setdefault(producer, offset)
            open_txns.setdefault(producer, []).extend(range(offset, offset + count))
            everything.extend(range(offset, offset + count))
            offset += count
        elif producer in open_txns:  # a marker ends the open transaction (none without one)
            written = open_txns.pop(producer)
            if kind == "commit":
                committed.extend(written)
            else:
                aborted.append((producer, first_offset[producer]))
            del first_offset[producer]
            blob += marker(offset, producer, commit=kind == "commit")
            offset += 1
    # the fetch ends at the last stable offset: before the first transaction still open
    lso = min(first_offset.values(), default=offset)
    if lso < offset:
        blob = _cut(blob, lso)
    expected = sorted(o for o in committed if o < lso)
    got, position = fetched(blob, aborted, "read_committed")
    assert got == expected
    assert position == lso
    got, _ = fetched(blob, aborted, "read_uncommitted")
    assert got == [o for o in everything if o < lso]


def _cut(blob: bytes, end_offset: int) -> bytes:
    """The batches of ``blob`` below ``end_offset`` (batches never straddle it here)."""
    out = b""
    for batch in iter_batches(blob):
        if batch.base_offset >= end_offset:
            break
        out += bytes(batch.buffer)
    return out
