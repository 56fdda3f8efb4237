"""The control interface of ``kafkawire cluster``: one command a line, one answer a line ("ok ..." or
"error ..."), over a TCP socket (``--control-port``), so that a test in any language can inject faults
with ``printf 'move-leader events 0\\nquit\\n' | nc 127.0.0.1 PORT`` (``quit`` closes the connection: an
``nc`` that keeps it open after its input ends, as Debian's does, exits then).

Commands (NODE is a broker's node id, API a name such as Produce or a key, ERROR a name such as
NOT_LEADER_OR_FOLLOWER or a code):

    brokers                               the live brokers: "ok 1=host:port 2=host:port ..."
    create-topic TOPIC PARTITIONS [RF]    create a topic
    leader TOPIC PARTITION                "ok NODE EPOCH"
    move-leader TOPIC PARTITION [NODE]    elect another leader (the epoch goes up): "ok NODE EPOCH"
    stop-broker NODE / start-broker NODE  stop a broker (leaderships move) / start it (they come back)
    fail NODE API ERROR [COUNT]           the next COUNT (1) requests of API to NODE fail with ERROR
    drop NODE API [COUNT]                 the next COUNT (1) requests of API to NODE are never answered
    latency NODE MS                       delay every response of NODE by MS milliseconds
    throttle NODE BYTES_PER_SECOND        send NODE's responses at most this fast (0: unlimited)
    isr TOPIC PARTITION [NODE,NODE...]    set the in-sync replicas (none: every live replica again)
    clear [NODE]                          remove injected errors, latency and throttles
    help                                  this list
    quit                                  "ok", then the connection is closed
"""
from __future__ import annotations

import asyncio
import logging

from .cluster import Cluster

__all__ = ["execute", "serve_control"]

log = logging.getLogger(__name__)

_MAX_LINE = 4096


async def execute(cluster: Cluster, line: str) -> str:
    """Run one command line; the answer line (without its newline)."""
    words = line.split()
    if not words:
        return "error empty command (try help)"
    command, args = words[0].lower(), words[1:]
    try:
        return await _run(cluster, command, args)
    except (KeyError, ValueError, IndexError, TypeError) as error:
        return f"error {command}: {error}"
    except Exception as error:  # a command never takes the control socket down
        log.exception("control command %r failed", line)
        return f"error {command}: {error}"


async def _run(cluster: Cluster, command: str, args: list[str]) -> str:
    if command == "help":
        return "ok " + " | ".join(entry.split("  ")[0].strip() for entry in _COMMANDS)
    if command == "quit":  # the session closes the connection once this answer is sent
        return "ok"
    if command == "brokers":
        return "ok " + " ".join(f"{node}={cluster.broker(node).bootstrap}" for node in cluster.node_ids
                                if node not in cluster.stopped)
    if command == "create-topic":
        await cluster.create_topic(args[0], int(args[1]), int(args[2]) if len(args) > 2 else -1)
        return "ok"
    if command == "leader":
        info = cluster.partition(args[0], int(args[1]))
        return f"ok {info.leader} {info.leader_epoch}"
    if command == "move-leader":
        leader = cluster.move_leader(args[0], int(args[1]), int(args[2]) if len(args) > 2 else None)
        return f"ok {leader} {cluster.partition(args[0], int(args[1])).leader_epoch}"
    if command == "stop-broker":
        await cluster.stop_broker(int(args[0]))
        return "ok"
    if command == "start-broker":
        await cluster.start_broker(int(args[0]))
        return "ok"
    if command == "fail":
        cluster.fail_next(int(args[0]), args[1], args[2], int(args[3]) if len(args) > 3 else 1)
        return "ok"
    if command == "drop":
        cluster.drop_next(int(args[0]), args[1], int(args[2]) if len(args) > 2 else 1)
        return "ok"
    if command == "latency":
        cluster.set_latency(int(args[0]), float(args[1]))
        return "ok"
    if command == "throttle":
        cluster.set_throttle(int(args[0]), int(args[1]))
        return "ok"
    if command == "isr":
        nodes = [int(node) for node in args[2].split(",")] if len(args) > 2 else None
        return "ok " + ",".join(str(node) for node in cluster.set_isr(args[0], int(args[1]), nodes))
    if command == "clear":
        cluster.clear_faults(int(args[0]) if args else None)
        return "ok"
    return f"error unknown command {command!r} (try help)"


_COMMANDS = [line.strip() for line in (__doc__ or "").split("Commands")[1].splitlines()[2:] if line.strip()]


async def serve_control(cluster: Cluster, host: str, port: int) -> asyncio.base_events.Server:
    """Listen for control connections on ``host``:``port`` (0: a free port)."""
    async def session(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                line = await reader.readline()
                if not line:
                    return
                if len(line) > _MAX_LINE:
                    writer.write(b"error line too long\n")
                    return
                text = line.decode(errors="replace")
                answer = await execute(cluster, text)
                writer.write(answer.encode() + b"\n")
                await writer.drain()
                if answer == "ok" and text.split()[0].lower() == "quit":
                    return
        except (ConnectionError, asyncio.LimitOverrunError, ValueError):
            return
        finally:
            writer.close()

    return await asyncio.start_server(session, host, port, limit=_MAX_LINE + 1)
