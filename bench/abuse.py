"""Abusive clients for bench/broker.py's "under abuse" row, in a process of their own (so that they
take no GIL from the client being measured):

- ``--idle N`` connections that connect and never send a byte;
- ``--slow N`` slow readers, each sending a Fetch of up to 1 MiB from partition 0 and reading the answer
  16 KiB every 50 ms (the broker's sends back up against a full socket), then asking again.

    python bench/abuse.py --bootstrap 127.0.0.1:9092 --topic bench --idle 1000 --slow 100

Prints "ready" once every connection is open, and runs until killed.
"""
from __future__ import annotations

import argparse
import resource
import selectors
import socket
import struct
import sys
import time

from kafkawire.framing import Correlator
from kafkawire.messages import FetchRequest

READ_BYTES = 16 * 1024
READ_EVERY_S = 0.05


def fetch_frame(topic: str) -> bytes:
    request = FetchRequest(replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                           topics=[FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
                               partition=0, fetch_offset=0, partition_max_bytes=1 << 20, current_leader_epoch=-1,
                               log_start_offset=-1)])])
    return Correlator(client_id="slow-reader").request(request, 11)


class SlowReader:
    def __init__(self, address: tuple[str, int], frame: bytes):
        self.sock = socket.create_connection(address)
        self.sock.setblocking(False)
        self.frame = frame
        self.left = 0  # bytes of the current response still to read
        self.header = b""
        self.ask()

    def ask(self) -> None:
        self.sock.setblocking(True)
        self.sock.sendall(self.frame)
        self.sock.setblocking(False)
        self.left, self.header = -1, b""

    def read_some(self) -> None:
        try:
            data = self.sock.recv(READ_BYTES if self.left < 0 else min(READ_BYTES, self.left))
        except BlockingIOError:
            return
        if not data:
            raise ConnectionError("the broker closed a slow reader")
        if self.left < 0:  # the size prefix (and perhaps more) came in
            self.header += data
            if len(self.header) < 4:
                return
            self.left = struct.unpack_from(">i", self.header)[0] + 4 - len(self.header)
        else:
            self.left -= len(data)
        if self.left == 0:
            self.ask()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--idle", type=int, default=1000)
    parser.add_argument("--slow", type=int, default=100)
    args = parser.parse_args(argv)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    host, port = args.bootstrap.rsplit(":", 1)
    address = (host, int(port))
    idle = [socket.create_connection(address) for _ in range(args.idle)]
    frame = fetch_frame(args.topic)
    readers = [SlowReader(address, frame) for _ in range(args.slow)]
    selector = selectors.DefaultSelector()  # epoll: past select()'s 1,024 descriptors
    for reader in readers:
        selector.register(reader.sock, selectors.EVENT_READ, reader)
    print("ready", flush=True)
    while idle:
        started = time.monotonic()
        for key, _ in selector.select(READ_EVERY_S):
            key.data.read_some()
        time.sleep(max(0.0, READ_EVERY_S - (time.monotonic() - started)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
