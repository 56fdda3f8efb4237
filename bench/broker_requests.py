"""The broker's CPU per request on two requests of issue 32, in-process, without sockets:

    .venv/bin/python bench/broker_requests.py             # both requests, native encoder and Python writers
    .venv/bin/python bench/broker_requests.py --profile   # and a cProfile of each (native encoder)

1. All-topics Metadata (v12, topics null) at 10,000 partitions: 100 topics of 100 partitions.
2. Small produce: ProduceRequest v9, one 1 KiB batch of 4 records to one partition, acks=1.

Each request goes the way the broker's connection takes it: the request frame decoded, the handler,
the response framed by ``encode_response_parts``. Timed by thread CPU time (the machine is shared), the
median of --repeats blocks; each request is timed with the native encoder and again with the generated
Python writers (the response classes' native encoders set aside), interleaved in one run.
"""
from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import git_state  # noqa: E402
from kafkawire import messages as m  # noqa: E402
from kafkawire.broker.apis.state import RequestContext  # noqa: E402
from kafkawire.broker.config.broker_config import BrokerConfig  # noqa: E402
from kafkawire.broker.dispatch.handlers import Handlers  # noqa: E402
from kafkawire.broker.groups.coordinator import GroupCoordinator  # noqa: E402
from kafkawire.broker.topics import TopicManager  # noqa: E402
from kafkawire.codec import native  # noqa: E402
from kafkawire.framing import encode_request, encode_response_parts, read_request  # noqa: E402
from kafkawire.records import RecordBatchBuilder  # noqa: E402

TOPICS, PARTITIONS = 100, 100


def request_frame(body, version: int) -> bytes:
    header = m.RequestHeader(request_api_key=body.API_KEY, request_api_version=version, correlation_id=1,
                             client_id="bench")
    return encode_request(header, body)[4:]


async def serve(handlers: Handlers, context: RequestContext, frame: bytes, version: int):
    header, request, _ = read_request(frame)
    response = await handlers.handle(header.request_api_key, request, version, context)
    return encode_response_parts(header.request_api_key, version, header.correlation_id, response)


class PythonWriters:
    """The response classes' native encoders set aside: their bodies go through the Python writers."""

    def __init__(self, *classes):
        self.classes = classes
        self.saved: list[dict] = []

    def __enter__(self):
        self.saved = [cls.__dict__.get("_ENCODERS", {}) for cls in self.classes]
        for cls in self.classes:
            cls._ENCODERS = {}

    def __exit__(self, *exc):
        for cls, encoders in zip(self.classes, self.saved):
            cls._ENCODERS = encoders


async def main(args) -> None:
    with tempfile.TemporaryDirectory() as data_dir:
        config = BrokerConfig(data_dir=Path(data_dir), port=0, group_initial_rebalance_delay_ms=0)
        topics = TopicManager(config)
        topics.load()
        groups = GroupCoordinator(Path(data_dir) / "__consumer_offsets", initial_rebalance_delay_ms=0)
        await groups.start()
        handlers = Handlers(config, topics, groups, port=9092)
        context = RequestContext(config.listener_list()[0], 9092, "User:ANONYMOUS", "127.0.0.1", "bench")
        try:
            for first in range(0, TOPICS, 10):  # ten topics per request: Kafka refuses larger batches
                create = m.CreateTopicsRequest(timeout_ms=60_000, topics=[
                    m.CreateTopicsRequest.CreatableTopic(name=f"topic-{t:03d}", num_partitions=PARTITIONS,
                                                         replication_factor=1) for t in range(first, first + 10)])
                _, created, _ = read_request(request_frame(create, 7))
                result = await handlers.handle(create.API_KEY, created, 7, context)
                assert all(t.error_code == 0 for t in result.topics), [t.error_message for t in result.topics]
            builder = RecordBatchBuilder()
            for i in range(4):
                builder.append(b"v" * 240, key=b"key-%d" % i)
            produce = m.ProduceRequest(acks=1, timeout_ms=30_000, topic_data=[m.ProduceRequest.TopicProduceData(
                name="topic-000", partition_data=[m.ProduceRequest.PartitionProduceData(
                    index=0, records=builder.build())])])
            cases = [
                (f"all-topics Metadata v12, {TOPICS * PARTITIONS:,} partitions",
                 request_frame(m.MetadataRequest(topics=None), 12), 12, m.MetadataResponse, 10),
                ("small produce (v9, one 1 KiB batch, acks=1)", request_frame(produce, 9), 9, m.ProduceResponse,
                 2000),
            ]
            print(f"commit {git_state()}; native encoder {'built' if native.ENCODER_ACTIVE else 'NOT built'}; "
                  f"CPU µs per request, median of {args.repeats} blocks\n")
            print("| request | response bytes | native encoder | Python writers | writers ÷ native |")
            print("|---|---:|---:|---:|---:|")
            for name, frame, version, response_cls, n in cases:
                size = sum(map(len, await serve(handlers, context, frame, version)))
                samples: dict[str, list[float]] = {"native": [], "writers": []}
                for _ in range(args.repeats):
                    for mode in ("native", "writers"):
                        setting = PythonWriters(response_cls, m.ResponseHeader) if mode == "writers" else None
                        if setting:
                            setting.__enter__()
                        t = time.thread_time()
                        for _ in range(n):
                            await serve(handlers, context, frame, version)
                        samples[mode].append((time.thread_time() - t) / n)
                        if setting:
                            setting.__exit__()
                a, b = statistics.median(samples["native"]), statistics.median(samples["writers"])
                print(f"| {name} | {size:,} | {a * 1e6:,.0f} | {b * 1e6:,.0f} | {b / a:.2f}× |")
                if args.profile:
                    await profile(handlers, context, frame, version, n, name)
        finally:
            handlers.close()
            await groups.close()
            topics.close()


async def profile(handlers, context, frame, version, n, name) -> None:
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(n):
        await serve(handlers, context, frame, version)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(8)
    print(f"\ncProfile, {name}, {n} requests (tottime):\n")
    print("\n".join(line for line in out.getvalue().splitlines() if line.strip()))
    print()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--profile", action="store_true")
    asyncio.run(main(parser.parse_args()))
