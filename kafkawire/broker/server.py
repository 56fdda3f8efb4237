"""The broker: its listeners (``network.listeners``), each an asyncio server whose connections
(``network.connection.Connection``) read requests and write responses, the shared state they serve from
(topics, groups, handlers), and the background work (retention, closing idle connections).

Kafka's limits guard the connections: ``max.connections`` and ``max.connections.per.ip``
(``network.connection_limits``), ``queued.max.request.bytes`` (``network.request_memory``), ``socket.request.max.bytes``
and ``connections.max.idle.ms``.
"""
from __future__ import annotations

import asyncio
import functools
import gc
import logging
import socket
import time
from typing import TYPE_CHECKING, Any, cast

from .config.broker_config import BrokerConfig
from .network.connection import Connection
from .network.connection_limits import ConnectionLimits, descriptor_budget
from .network.receiving import FrameReceiver
from .network.faults import Faults
from .groups.state_files import GROUP_CONFIG_FILE_NAME, OFFSETS_FOLDER_NAME
from .dispatch.handlers import Handlers
from .network.listeners import Listener
from .metrics import BrokerMetrics
from .node_view import NodeView, SingleNode
from .network.request_memory import RequestMemory
from .security.listener_security import ListenerSecurity
from .storage.descriptors import DescriptorCache
from .topics import TopicManager

if TYPE_CHECKING:
    from .delegation_tokens import DelegationTokens
    from .groups.coordinator import GroupCoordinator
    from .network.tap import WireTap
    from .security.acls import Authorizer
    from .security.scram_store import ScramStore
    from .storage.cleaner import LogCleanerManager
    from .storage.log import PartitionLog

__all__ = ["Broker"]

log = logging.getLogger(__name__)
_LOG_DIR_CHECK_S = 1.0  # how often each of several log directories is looked at

_RETENTION_SLICE = 16  # partitions whose retention runs between two turns of the loop


class Broker:
    """A single-node Kafka broker. Use as ``async with Broker(data_dir=..., port=0) as broker:``;
    ``broker.port`` is the port bound and ``broker.bootstrap`` the address for clients.

    A node of an in-process cluster (``broker.cluster``) is a Broker built ``over`` another: it has its
    own listeners, connections, fetch sessions and node id, and serves the other's topics, logs, groups
    and transactions, answering for what its ``view`` says it leads and coordinates."""

    descriptors: DescriptorCache
    topics: TopicManager
    authorizer: Authorizer | None

    def __init__(self, config: BrokerConfig | None = None, *, over: "Broker | None" = None,
                 view: NodeView | None = None, **settings: Any) -> None:
        self.config = config if config is not None else BrokerConfig(**settings)
        self.over = over
        self.view: NodeView = view if view is not None else SingleNode(self.config.node_id)
        self.faults = Faults()  # injected on command (tests of clients under failure)
        connection_descriptors, file_descriptors = descriptor_budget()
        # the group coordinator, SCRAM credentials and delegation tokens: built on first use (or at start,
        # when stored state is there to recover), so that a broker that serves none loads none of them
        self._groups: GroupCoordinator | None = None
        self._scram: ScramStore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop the broker runs on (set by start)
        self._tokens: DelegationTokens | None = None
        if over is not None:  # the storage and coordinators are the other broker's
            self.descriptors, self.topics = over.descriptors, over.topics
        else:
            self.descriptors = DescriptorCache(max(file_descriptors // 3, 16))  # segments hold up to 3 each
            self.topics = TopicManager(self.config, self.descriptors)
        self.listeners: list[Listener] = self.config.listener_list()
        # each listener's TLS and SASL settings, checked now: what cannot be honoured is refused at start
        self.security = {listener.name: ListenerSecurity(listener, self.config.security) for listener in self.listeners}
        if over is not None:
            self.authorizer = over.authorizer
        else:
            self._build_security()
        self.handlers: Handlers | None = None
        self.port: int | None = None  # the first listener's bound port
        self.ports: dict[str, int] = {}  # listener name -> bound port
        self._servers: list[asyncio.base_events.Server] = []
        self._connections: dict[asyncio.Task[None], Connection] = {}
        # connections over their ip's connection_creation_rate, held until their throttle time has passed
        self._held: dict[asyncio.StreamWriter, asyncio.TimerHandle] = {}
        self._retention: asyncio.TimerHandle | None = None
        self._idle_sweeper: asyncio.Task[None] | None = None
        self._log_dir_checker: asyncio.Task[None] | None = None
        self._transaction_sweeper: asyncio.Task[None] | None = None
        self._cleaner: LogCleanerManager | None = None  # built by ``cleaner`` on first use
        self._cleaner_task: asyncio.Task[None] | None = None
        self._group_sweeper: asyncio.Task[None] | None = None
        self._token_sweeper: asyncio.Task[None] | None = None
        self.limits = ConnectionLimits(self.config.max_connections, self.config.connection_limit_for,
                                       connection_descriptors)
        self.memory = RequestMemory(self.config.queued_max_request_bytes)
        self.tap: WireTap | None = None  # records every byte read and written (config.tap_path)
        self._closed = False
        self._stopped = False  # stop_listening: connections accepted before it are dropped too
        self.metrics: BrokerMetrics | None = BrokerMetrics() if self.config.metrics_port is not None else None
        self.metrics_port: int | None = None  # bound by start when metrics are on

    @property
    def cleaner(self) -> LogCleanerManager | None:
        """log.cleaner.enable: compaction in the background (None when off); built on first use."""
        if self._cleaner is None and self.config.log_cleaner_enable and self.config.log_cleaner_threads > 0:
            from .storage.cleaner import LogCleaner, LogCleanerManager  # (only compacted topics need it)
            config = self.config  # one thread whatever log.cleaner.threads says
            self._cleaner = LogCleanerManager(
                config.data_dir, LogCleaner(config.log_cleaner_dedupe_buffer_size, config.log_cleaner_io_buffer_size,
                                            config.log_cleaner_io_buffer_load_factor,
                                            config.log_cleaner_io_max_bytes_per_second),
                config.log_cleaner_backoff_ms)
            self._cleaner.load()
        return self._cleaner

    @property
    def groups(self) -> GroupCoordinator:
        """The group coordinator (classic, consumer and streams groups, committed offsets): built, and its
        stored groups loaded, at start when there are any, else on first use."""
        if self.over is not None:
            return self.over.groups
        return self._groups if self._groups is not None else self._build_groups()

    def _stored_groups(self) -> bool:
        """Whether the data folder holds group state (offsets, groups, group configs) to recover."""
        folder = self.config.data_dir / OFFSETS_FOLDER_NAME
        return (folder.is_dir() and any(folder.iterdir())) or (self.config.data_dir / GROUP_CONFIG_FILE_NAME).exists()

    def _build_groups(self) -> GroupCoordinator:
        from .groups.coordinator import GroupCoordinator  # (a broker that serves no group never loads them)
        from .groups.group_configs import GroupConfigs
        config = self.config
        self._groups = GroupCoordinator(
            config.data_dir / OFFSETS_FOLDER_NAME, initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
            partition_exists=lambda topic, p: self.topics.log(topic, p) is not None,
            topic_metadata=self._topic_metadata,
            consumer_session_timeout_ms=config.group_consumer_session_timeout_ms,
            consumer_heartbeat_interval_ms=config.group_consumer_heartbeat_interval_ms,
            consumer_assignors=config.consumer_assignors,
            streams_session_timeout_ms=config.group_streams_session_timeout_ms,
            streams_heartbeat_interval_ms=config.group_streams_heartbeat_interval_ms,
            streams_num_standby_replicas=config.group_streams_num_standby_replicas,
            streams_num_warmup_replicas=config.group_streams_num_warmup_replicas,
            configs=GroupConfigs(config, config.data_dir / GROUP_CONFIG_FILE_NAME))
        self._groups.load(self._loop)
        return self._groups

    def _build_security(self) -> None:
        self.config.data_dir.mkdir(parents=True, exist_ok=True)
        if self.config.scram_credentials:  # as kafka-storage format --add-scram adds them
            from .security.scram_store import parse_add_scram
            for entry in self.config.scram_credentials:
                mechanism, user, credential = parse_add_scram(entry)
                self.scram.put(user, credential)
            self.scram.save()
        self.authorizer = None  # no authorizer.class.name: every request is allowed (and the ACLs stay unloaded)
        if (self.config.security.get("authorizer.class.name") or "").strip():
            from .security.acls import Authorizer
            self.authorizer = Authorizer.from_settings(self.config.security, self.config.data_dir / "acls.json")

    @property
    def scram(self) -> ScramStore:
        """The SCRAM credentials (SASL/SCRAM and their admin APIs), read on first use."""
        if self.over is not None:
            return self.over.scram
        if self._scram is None:
            from .security.scram_store import ScramStore
            self._scram = ScramStore(self.config.data_dir / "scram-credentials.json")
        return self._scram

    @property
    def tokens(self) -> DelegationTokens:
        """The delegation tokens, read on first use."""
        if self.over is not None:
            return self.over.tokens
        if self._tokens is None:
            from .delegation_tokens import DelegationTokens
            config = self.config
            self._tokens = DelegationTokens(config.data_dir / "delegation-tokens.json",
                                            config.delegation_token_secret_key,
                                            config.delegation_token_max_lifetime_ms,
                                            config.delegation_token_expiry_time_ms)
        return self._tokens

    @property
    def bootstrap(self) -> str:
        """The first listener's advertised address."""
        return self.bootstrap_for(self.listeners[0].name)

    def bootstrap_for(self, listener_name: str) -> str:
        listener = next(item for item in self.listeners if item.name == listener_name.upper())
        host, port = listener.advertised(self.ports[listener.name])
        return f"{host}:{port}"

    def bound_port(self, listener: Listener) -> int:
        return self.ports[listener.name]

    @property
    def serving(self) -> bool:
        return bool(self._servers) and self._servers[0].is_serving()

    async def start(self) -> None:
        if self.config.tap_path is not None and self.tap is None:
            from .network.tap import WireTap  # (the pcap writer, imported only when asked for)
            self.tap = WireTap(self.config.tap_path)
        self._loop = asyncio.get_running_loop()
        if self.over is None:
            self.descriptors.bind_to_current_thread()  # the loop's: only it closes segment files
            self.topics.load()
            if self._stored_groups():  # their members' session timeouts run from now, as Kafka's loadGroup
                self._build_groups()
        for security in self.security.values():  # OAUTHBEARER key sets: a broker without them does not start
            await security.start()
        await self._listen()
        self.port = self.ports[self.listeners[0].name]
        self.handlers = Handlers(self.config, self.topics, lambda: self.groups, self.port, lambda: self.scram,
                                 self.authorizer, metrics=self.metrics, tokens=lambda: self.tokens, view=self.view,
                                 shared=self.over.handlers if self.over is not None else None)
        if self.metrics is not None:
            assert self.config.metrics_port is not None
            self.metrics.parked_fetches.set_function(lambda: len(self.handlers.purgatory) if self.handlers else 0)
            # (a coordinator not built yet has no group: the gauges do not build it)
            owner = self.over if self.over is not None else self
            self.metrics.group_count.labels("classic").set_function(
                lambda: len(owner._groups.groups) if owner._groups is not None else 0)
            self.metrics.group_count.labels("consumer").set_function(
                lambda: len(owner._groups.consumer.groups) if owner._groups is not None else 0)
            self.metrics.group_count.labels("share").set_function(
                lambda: len(self.handlers.share.groups.groups) if self.handlers and self.handlers.share_built else 0)
            self.metrics_port = self.metrics.serve(self.config.metrics_port, self.config.host)
        if self.over is not None:  # the housekeeping of shared state is the other broker's
            log.info("kafkawire broker node %d listening on %s", self.config.node_id, self.bootstrap)
            return
        self.handlers.recover_transactions()  # transactions a crash left in PrepareCommit/PrepareAbort complete
        self._schedule_retention()
        loop = asyncio.get_running_loop()
        self._idle_sweeper = loop.create_task(self._close_idle_connections())
        self._transaction_sweeper = loop.create_task(self._transaction_housekeeping())
        if self.config.log_cleaner_enable and self.config.log_cleaner_threads > 0:
            self._cleaner_task = loop.create_task(self._clean_logs())
        self._group_sweeper = loop.create_task(self._expire_consumer_group_members())
        if self.config.delegation_token_secret_key:  # (tokens are enabled)
            self._token_sweeper = loop.create_task(self._expire_delegation_tokens())
        if self.config.freeze_heap:  # what the start built lives as long as the broker: no collection walks it
            gc.freeze()
        if self.topics.dirs.several:
            self._log_dir_checker = loop.create_task(self._check_log_dirs())
        if self.config.ignored_properties:  # accepted as Kafka's, named once so nobody expects them to work
            log.warning("Kafka settings with no effect in one kafkawire process: %s",
                        ", ".join(self.config.ignored_properties))
        log.info("kafkawire broker listening on %s", self.bootstrap)

    async def _listen(self) -> None:
        """Open the listeners (again, after ``stop_listening``: on the ports bound the first time)."""
        for listener in self.listeners:
            security = self.security[listener.name]
            port = self.ports.get(listener.name, listener.port)
            server = await asyncio.get_running_loop().create_server(
                functools.partial(self._receiver, listener, security), listener.host or None, port,
                ssl=security.ssl_context)
            if self.config.socket_receive_buffer_bytes != -1:  # as Kafka: on the listening socket, inherited
                for sock in server.sockets:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.config.socket_receive_buffer_bytes)
            self._servers.append(server)
            self.ports[listener.name] = server.sockets[0].getsockname()[1]

    async def stop_listening(self) -> None:
        """A crash, as clients see it: the listeners closed, every connection dropped at once (nothing
        in flight answered), fetch sessions forgotten. ``resume_listening`` opens the same ports again."""
        self._stopped = True
        for _ in range(3):  # accepts under way become connections (which _serve drops) before the close
            await asyncio.sleep(0)
        for server in self._servers:
            server.close()
        for connection in self._connections.values():
            connection.writer.transport.abort()
        await asyncio.gather(*self._connections, return_exceptions=True)
        for server in self._servers:
            await server.wait_closed()
        self._servers.clear()
        if self.handlers is not None:
            self.handlers.state.sessions.sessions.clear()

    async def resume_listening(self) -> None:
        if not self._servers:
            await self._listen()
        self._stopped = False

    async def shutdown(self, grace_s: float = 10.0) -> None:
        """A graceful stop (Kafka's controlled shutdown, for one node): no new connections, every
        request already received answered (parked fetches at once, with what they have), then the
        connections closed, the logs flushed and closed. Connections still busy after ``grace_s`` are
        cut."""
        for server in self._servers:
            server.close()
        for connection in self._connections.values():
            connection.draining = True
            connection.end_throttle()
            if not connection.busy:
                connection.writer.close()  # waiting in a read: nothing is in flight
        if self.handlers is not None:
            self.handlers.purgatory.complete_all()
        if self._connections:
            done, pending = await asyncio.wait(list(self._connections), timeout=grace_s)
            if pending:
                log.warning("shutdown: %d connections still busy after %.0f s are closed", len(pending), grace_s)
        await self.close()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._retention is not None:
            self._retention.cancel()
        if self._cleaner is not None:
            self._cleaner.stop()  # a round on a worker thread ends at its next batch
        for task in (self._idle_sweeper, self._transaction_sweeper, self._group_sweeper, self._cleaner_task,
                     self._token_sweeper, self._log_dir_checker):
            if task is not None:
                task.cancel()
        if self._servers:
            for server in self._servers:
                server.close()
            for connection in self._connections.values():
                connection.close()  # each connection's read ends, and its task with it
            for held in list(self._held):
                self._release(held)
            await asyncio.gather(*self._connections, return_exceptions=True)
            for server in self._servers:
                await server.wait_closed()
        if self.handlers is not None:
            self.handlers.close()
        if self.over is None:
            if self._groups is not None:
                await self._groups.close()
            self.topics.close()
        for security in self.security.values():
            security.close()
        if self.tap is not None:
            self.tap.close()
        if self.metrics is not None:
            self.metrics.close()

    async def __aenter__(self) -> "Broker":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def serve_forever(self) -> None:
        if not self._servers:
            raise RuntimeError("the broker is not started")
        await asyncio.gather(*(server.serve_forever() for server in self._servers))

    # ---- retention ------------------------------------------------------------------------------
    def _schedule_retention(self) -> None:
        loop = asyncio.get_running_loop()
        self._retention = loop.call_later(self.config.retention_check_interval_ms / 1000,
                                          lambda: loop.create_task(self._apply_retention()))

    async def _apply_retention(self) -> None:
        """Retention over every partition, a few at a time: with thousands of partitions one pass
        would otherwise hold the loop (it stays on the loop, which owns the segments' files)."""
        now = time.time_ns() // 1_000_000
        for count, (topic, index, partition_log) in enumerate(list(self.topics.all_logs()), 1):
            try:
                if not partition_log.offline and not partition_log.empty_on_disk():  # (an idle, empty partition stays unopened: cheap)
                    await self._retain(partition_log, now)
            except OSError:
                log.exception("retention of %s-%d failed", topic.name, index)
            if count % _RETENTION_SLICE == 0:
                await asyncio.sleep(0)
        self._schedule_retention()

    async def _retain(self, partition_log: PartitionLog, now: int) -> None:
        remote = partition_log.remote
        if remote is not None:
            from .storage.remote import describe_closed_segment  # (only with tiered storage)
            for segment in partition_log.segments_to_copy():  # to the remote tier, the files off the loop
                closed = describe_closed_segment(segment)
                copied = await asyncio.to_thread(remote.copy_files, partition_log.name, closed)
                partition_log.add_remote_segment(copied)
        partition_log.apply_retention(now, copy_to_remote=False)

    async def _clean_logs(self) -> None:
        """The log cleaner's rounds, once a compacted log exists (until then its modules stay unloaded)."""
        while self._cleaner is None and not any(partition_log.config.compact for partition_log in self._logs()):
            await asyncio.sleep(self.config.log_cleaner_backoff_ms / 1000)
        cleaner = self.cleaner
        assert cleaner is not None
        await cleaner.run(self._logs)

    def _logs(self) -> list[PartitionLog]:
        # (not a log in an offline directory, nor one being moved: Kafka pauses its cleaning too)
        moving = self.topics.dirs.moves
        return [partition_log for _, _, partition_log in self.topics.all_logs()
                if not partition_log.offline and partition_log.name not in moving]

    async def _check_log_dirs(self) -> None:
        """With several log.dirs: a directory found gone or unwritable goes offline (its partitions
        answer KAFKA_STORAGE_ERROR), as Kafka's LogDirFailureChannel takes it on an I/O error."""
        while True:
            await asyncio.sleep(_LOG_DIR_CHECK_S)
            self.topics.check_log_dirs()

    # ---- KIP-848 consumer groups --------------------------------------------------------------------
    def _topic_metadata(self) -> dict[str, tuple[object, int]]:
        return {name: (topic.topic_id, len(topic.partitions)) for name, topic in self.topics.topics.items()
                if topic.partitions}

    async def _expire_consumer_group_members(self) -> None:
        """Fence consumer and streams group members past their session or rebalance timeout (checked ten
        times a second: a scan of the members, no timer per heartbeat)."""
        while True:
            await asyncio.sleep(0.1)
            try:
                if self._groups is not None:  # (none built: no member to fence)
                    self._groups.expire_members()
            except Exception:  # never let the sweep die
                log.exception("expiring consumer group members failed")

    async def _expire_delegation_tokens(self) -> None:
        """Remove the expired delegation tokens every delegation.token.expiry.check.interval.ms."""
        while True:
            await asyncio.sleep(self.config.delegation_token_expiry_check_interval_ms / 1000)
            try:
                self.tokens.sweep()
            except Exception:  # never let the sweep die: the next round tries again
                log.exception("expiring delegation tokens failed")

    # ---- transactions ---------------------------------------------------------------------------
    async def _transaction_housekeeping(self) -> None:
        """Abort transactions past their timeout (every transaction.abort.timed.out.transaction.cleanup.
        interval.ms), finish those whose markers failed, forget idle transactional ids (every
        transaction.remove.expired.transaction.cleanup.interval.ms)."""
        assert self.handlers is not None
        handlers = self.handlers
        config = self.config
        loop = asyncio.get_running_loop()
        next_expiry = loop.time() + config.transaction_expiration_interval_ms / 1000
        while True:
            await asyncio.sleep(config.transaction_abort_interval_ms / 1000)
            if not handlers.transactions_built:  # (no transaction yet: nothing to abort or forget)
                continue
            coordinator = handlers.transactions
            try:
                coordinator.retry_incomplete()
                coordinator.abort_timed_out()
                if loop.time() >= next_expiry:
                    coordinator.expire_transactional_ids()
                    next_expiry = loop.time() + config.transaction_expiration_interval_ms / 1000
            except Exception:  # never let housekeeping die: the next round tries again
                log.exception("transaction housekeeping failed")

    # ---- connections ----------------------------------------------------------------------------
    def _release(self, writer: asyncio.StreamWriter) -> None:
        """Close a connection held for being over its ip's connection rate (at its time, or the stop's)."""
        handle = self._held.pop(writer, None)
        if handle is not None:
            handle.cancel()
        writer.close()

    async def _close_idle_connections(self) -> None:
        """connections.max.idle.ms: close connections with no bytes read or written for that long (a
        connection whose request is being handled, say a parked fetch, is not idle)."""
        idle_s = self.config.connections_max_idle_ms / 1000
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(min(max(idle_s / 4, 0.01), 30.0))
            deadline = loop.time() - idle_s
            for task, connection in list(self._connections.items()):
                if not connection.busy and connection.last_active < deadline:
                    log.debug("closing connection from %s: idle for %.0f ms", connection.host,
                              (loop.time() - connection.last_active) * 1000)
                    connection.close()
                    self.memory.wake()  # it may be waiting for request memory rather than reading

    def _receiver(self, listener: Listener, security: ListenerSecurity) -> FrameReceiver:
        """A new connection's protocol: ``asyncio.start_server``'s, reading frames without copies."""
        # (the StreamReader only sees the end of the stream: the receiver reads the bytes)
        return FrameReceiver(asyncio.StreamReader(), functools.partial(self._serve, listener, security),
                             self.config.max_request_bytes)

    async def _serve(self, listener: Listener, security: ListenerSecurity, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        host = peer[0] if peer else ""
        if self._stopped:
            writer.transport.abort()
            return
        if not self.limits.admit(host):
            writer.close()
            return
        quotas = self.handlers.quotas if self.handlers is not None else None
        if quotas is not None and quotas.ip_enabled:
            delay_ms = quotas.admit_connection(host)
            if delay_ms:  # over the ip's connection_creation_rate (KIP-612): closed once the throttle time has
                self.limits.release(host)  # passed, as Kafka does, so the client does not reconnect at once
                self._held[writer] = asyncio.get_running_loop().call_later(delay_ms / 1000, self._release, writer)
                return
        if self.config.socket_send_buffer_bytes != -1:  # socket.send.buffer.bytes, as Kafka sets it on accept
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.config.socket_send_buffer_bytes)
        task = cast("asyncio.Task[None]", asyncio.current_task())  # (a connection's handler runs in its task)
        try:
            receiver = cast(FrameReceiver, writer.transport.get_protocol())  # _receiver's (over TLS too)
            connection = Connection(self, listener, security, receiver, writer, asyncio.get_running_loop().time())
        except ValueError as error:  # a client certificate that no principal mapping rule applies to
            log.warning("closing connection from %s on %s: %s", host, listener.name, error)
            self.limits.release(host)
            writer.close()
            return
        self._connections[task] = connection
        gauge = self.metrics.connections.labels(listener.name) if self.metrics is not None else None
        if gauge is not None:
            gauge.inc()
        try:
            await connection.run()
        finally:
            self.limits.release(host)
            self._connections.pop(task, None)
            if gauge is not None:
                gauge.dec()
