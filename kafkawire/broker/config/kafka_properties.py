"""The names of the properties Kafka 4.3 defines for a broker or controller (its ``KafkaConfig``: the
config definitions of the classes named below, and the broker names of the topic configs), and
the prefixes Kafka passes on to a plugin or a listener. Names only: what each means is Kafka's.

``known_kafka_property`` says whether Kafka knows a key; ``BrokerConfig.from_properties`` refuses one
it does not, and lists the ones it knows but has no use for in one process.
"""
from __future__ import annotations

import re

__all__ = ["KAFKA_BROKER_PROPERTIES", "known_kafka_property"]

# By the Kafka class that defines them (the topic configs' broker names under LogConfig).
_BY_CLASS = """
    # ServerConfigs
    authorizer.class.name background.threads broker.id broker.rack compression.gzip.level
    compression.lz4.level compression.type compression.zstd.level config.providers
    controlled.shutdown.enable delete.topic.enable early.start.listeners fetch.max.bytes
    max.incremental.fetch.session.cache.slots max.request.partition.size.limit message.max.bytes
    num.io.threads num.replica.alter.log.dirs.threads request.timeout.ms
    socket.connection.setup.timeout.max.ms socket.connection.setup.timeout.ms unstable.api.versions.enable
    unstable.feature.versions.enable

    # KRaftConfigs
    broker.heartbeat.interval.ms broker.session.timeout.ms controller.listener.names
    controller.performance.always.log.threshold.ms controller.performance.sample.period.ms
    initial.broker.registration.timeout.ms node.id process.roles sasl.mechanism.controller.protocol
    server.max.startup.time.ms

    # MetadataLogConfig
    internal.metadata.delete.delay.millis internal.metadata.log.segment.bytes
    internal.metadata.max.batch.size.in.bytes internal.metadata.max.fetch.size.in.bytes metadata.log.dir
    metadata.log.max.record.bytes.between.snapshots metadata.log.max.snapshot.interval.ms
    metadata.log.segment.bytes metadata.log.segment.ms metadata.max.idle.interval.ms
    metadata.max.retention.bytes metadata.max.retention.ms

    # QuorumConfig
    controller.quorum.append.linger.ms controller.quorum.auto.join.enable
    controller.quorum.bootstrap.servers controller.quorum.election.backoff.max.ms
    controller.quorum.election.timeout.ms controller.quorum.fetch.timeout.ms
    controller.quorum.request.timeout.ms controller.quorum.retry.backoff.ms controller.quorum.voters

    # SocketServerConfigs
    advertised.listeners connection.failed.authentication.delay.ms connections.max.idle.ms
    listener.security.protocol.map listeners max.connection.creation.rate max.connections
    max.connections.per.ip max.connections.per.ip.overrides num.network.threads queued.max.request.bytes
    queued.max.requests socket.listen.backlog.size socket.receive.buffer.bytes socket.request.max.bytes
    socket.send.buffer.bytes

    # ReplicationConfigs
    auto.leader.rebalance.enable controller.socket.timeout.ms default.replication.factor
    delete.records.purgatory.purge.interval.requests fetch.purgatory.purge.interval.requests
    inter.broker.listener.name leader.imbalance.check.interval.seconds num.replica.fetchers
    producer.purgatory.purge.interval.requests replica.fetch.backoff.ms replica.fetch.max.bytes
    replica.fetch.min.bytes replica.fetch.response.max.bytes replica.fetch.wait.max.ms
    replica.high.watermark.checkpoint.interval.ms replica.lag.time.max.ms replica.selector.class
    replica.socket.receive.buffer.bytes replica.socket.timeout.ms security.inter.broker.protocol
    unclean.leader.election.enable unclean.leader.election.interval.ms

    # LogConfig
    alter.config.policy.class.name auto.create.topics.enable create.topic.policy.class.name
    log.cleanup.policy log.dir log.dir.failure.timeout.ms log.dirs log.flush.interval.messages
    log.flush.interval.ms log.flush.offset.checkpoint.interval.ms log.flush.scheduler.interval.ms
    log.flush.start.offset.checkpoint.interval.ms log.index.interval.bytes log.index.size.max.bytes
    log.initial.task.delay.ms log.message.timestamp.after.max.ms log.message.timestamp.before.max.ms
    log.message.timestamp.type log.preallocate log.retention.bytes log.retention.check.interval.ms
    log.retention.hours log.retention.minutes log.retention.ms log.roll.hours log.roll.jitter.hours
    log.roll.jitter.ms log.roll.ms log.segment.bytes log.segment.delete.delay.ms min.insync.replicas
    num.partitions num.recovery.threads.per.data.dir

    # CleanerConfig
    log.cleaner.backoff.ms log.cleaner.dedupe.buffer.size log.cleaner.delete.retention.ms log.cleaner.enable
    log.cleaner.io.buffer.load.factor log.cleaner.io.buffer.size log.cleaner.io.max.bytes.per.second
    log.cleaner.max.compaction.lag.ms log.cleaner.min.cleanable.ratio log.cleaner.min.compaction.lag.ms
    log.cleaner.threads

    # RemoteLogManagerConfig
    log.local.retention.bytes log.local.retention.ms remote.fetch.max.wait.ms
    remote.list.offsets.request.timeout.ms remote.log.index.file.cache.total.size.bytes
    remote.log.manager.copier.thread.pool.size remote.log.manager.copy.max.bytes.per.second
    remote.log.manager.copy.quota.window.num remote.log.manager.copy.quota.window.size.seconds
    remote.log.manager.expiration.thread.pool.size remote.log.manager.fetch.max.bytes.per.second
    remote.log.manager.fetch.quota.window.num remote.log.manager.fetch.quota.window.size.seconds
    remote.log.manager.follower.thread.pool.size remote.log.manager.task.interval.ms
    remote.log.manager.task.retry.backoff.max.ms remote.log.manager.task.retry.backoff.ms
    remote.log.manager.task.retry.jitter remote.log.manager.thread.pool.size
    remote.log.metadata.custom.metadata.max.bytes remote.log.metadata.manager.class.name
    remote.log.metadata.manager.class.path remote.log.metadata.manager.impl.prefix
    remote.log.metadata.manager.listener.name remote.log.reader.max.pending.tasks remote.log.reader.threads
    remote.log.storage.manager.class.name remote.log.storage.manager.class.path
    remote.log.storage.manager.impl.prefix remote.log.storage.system.enable

    # GroupCoordinatorConfig
    group.consumer.assignors group.consumer.heartbeat.interval.ms group.consumer.max.heartbeat.interval.ms
    group.consumer.max.session.timeout.ms group.consumer.max.size group.consumer.migration.policy
    group.consumer.min.heartbeat.interval.ms group.consumer.min.session.timeout.ms
    group.consumer.regex.refresh.interval.ms group.consumer.session.timeout.ms
    group.coordinator.append.linger.ms group.coordinator.rebalance.protocols group.coordinator.threads
    group.initial.rebalance.delay.ms group.max.session.timeout.ms group.max.size
    group.min.session.timeout.ms group.share.assignors group.share.heartbeat.interval.ms
    group.share.initialize.retry.interval.ms group.share.max.heartbeat.interval.ms
    group.share.max.session.timeout.ms group.share.max.size group.share.min.heartbeat.interval.ms
    group.share.min.session.timeout.ms group.share.session.timeout.ms group.streams.heartbeat.interval.ms
    group.streams.initial.rebalance.delay.ms group.streams.max.heartbeat.interval.ms
    group.streams.max.session.timeout.ms group.streams.max.size group.streams.max.standby.replicas
    group.streams.min.heartbeat.interval.ms group.streams.min.session.timeout.ms
    group.streams.num.standby.replicas group.streams.session.timeout.ms offset.metadata.max.bytes
    offsets.commit.timeout.ms offsets.load.buffer.size offsets.retention.check.interval.ms
    offsets.retention.minutes offsets.topic.compression.codec offsets.topic.num.partitions
    offsets.topic.replication.factor offsets.topic.segment.bytes

    # ShareGroupConfig
    group.share.delivery.count.limit group.share.enable group.share.max.record.lock.duration.ms
    group.share.max.share.sessions group.share.min.record.lock.duration.ms
    group.share.partition.max.record.locks group.share.persister.class.name
    group.share.record.lock.duration.ms share.fetch.purgatory.purge.interval.requests

    # ShareCoordinatorConfig
    share.coordinator.append.linger.ms share.coordinator.cold.partition.snapshot.interval.ms
    share.coordinator.load.buffer.size share.coordinator.snapshot.update.records.per.snapshot
    share.coordinator.state.topic.compression.codec share.coordinator.state.topic.min.isr
    share.coordinator.state.topic.num.partitions share.coordinator.state.topic.prune.interval.ms
    share.coordinator.state.topic.replication.factor share.coordinator.state.topic.segment.bytes
    share.coordinator.threads share.coordinator.write.timeout.ms

    # TransactionLogConfig
    producer.id.expiration.check.interval.ms producer.id.expiration.ms
    transaction.partition.verification.enable transaction.state.log.load.buffer.size
    transaction.state.log.min.isr transaction.state.log.num.partitions
    transaction.state.log.replication.factor transaction.state.log.segment.bytes

    # TransactionStateManagerConfig
    transaction.abort.timed.out.transaction.cleanup.interval.ms transaction.max.timeout.ms
    transaction.remove.expired.transaction.cleanup.interval.ms transaction.two.phase.commit.enable
    transactional.id.expiration.ms

    # AddPartitionsToTxnConfig
    add.partitions.to.txn.retry.backoff.max.ms add.partitions.to.txn.retry.backoff.ms

    # QuotaConfig
    alter.log.dirs.replication.quota.window.num alter.log.dirs.replication.quota.window.size.seconds
    client.quota.callback.class controller.quota.window.num controller.quota.window.size.seconds
    follower.replication.throttled.rate leader.replication.throttled.rate quota.window.num
    quota.window.size.seconds replica.alter.log.dirs.io.max.bytes.per.second replication.quota.window.num
    replication.quota.window.size.seconds

    # MetricConfigs
    kafka.metrics.polling.interval.secs kafka.metrics.reporters metric.reporters metrics.num.samples
    metrics.recording.level metrics.sample.window.ms telemetry.max.bytes

    # BrokerSecurityConfigs
    connections.max.reauth.ms principal.builder.class sasl.client.callback.handler.class
    sasl.enabled.mechanisms sasl.jaas.config sasl.kerberos.kinit.cmd sasl.kerberos.min.time.before.relogin
    sasl.kerberos.principal.to.local.rules sasl.kerberos.service.name sasl.kerberos.ticket.renew.jitter
    sasl.kerberos.ticket.renew.window.factor sasl.login.callback.handler.class sasl.login.class
    sasl.login.connect.timeout.ms sasl.login.read.timeout.ms sasl.login.refresh.buffer.seconds
    sasl.login.refresh.min.period.seconds sasl.login.refresh.window.factor sasl.login.refresh.window.jitter
    sasl.login.retry.backoff.max.ms sasl.login.retry.backoff.ms sasl.mechanism.inter.broker.protocol
    sasl.oauthbearer.assertion.algorithm sasl.oauthbearer.assertion.claim.aud
    sasl.oauthbearer.assertion.claim.exp.seconds sasl.oauthbearer.assertion.claim.iss
    sasl.oauthbearer.assertion.claim.jti.include sasl.oauthbearer.assertion.claim.nbf.seconds
    sasl.oauthbearer.assertion.claim.sub sasl.oauthbearer.assertion.file
    sasl.oauthbearer.assertion.private.key.file sasl.oauthbearer.assertion.private.key.passphrase
    sasl.oauthbearer.assertion.template.file sasl.oauthbearer.client.credentials.client.id
    sasl.oauthbearer.client.credentials.client.secret sasl.oauthbearer.clock.skew.seconds
    sasl.oauthbearer.expected.audience sasl.oauthbearer.expected.issuer
    sasl.oauthbearer.jwks.endpoint.refresh.ms sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms
    sasl.oauthbearer.jwks.endpoint.retry.backoff.ms sasl.oauthbearer.jwks.endpoint.url
    sasl.oauthbearer.jwt.retriever.class sasl.oauthbearer.jwt.validator.class sasl.oauthbearer.scope
    sasl.oauthbearer.scope.claim.name sasl.oauthbearer.sub.claim.name sasl.oauthbearer.token.endpoint.url
    sasl.server.callback.handler.class sasl.server.max.receive.size security.providers ssl.allow.dn.changes
    ssl.allow.san.changes ssl.cipher.suites ssl.client.auth ssl.enabled.protocols
    ssl.endpoint.identification.algorithm ssl.engine.factory.class ssl.key.password ssl.keymanager.algorithm
    ssl.keystore.certificate.chain ssl.keystore.key ssl.keystore.location ssl.keystore.password
    ssl.keystore.type ssl.principal.mapping.rules ssl.protocol ssl.provider ssl.secure.random.implementation
    ssl.trustmanager.algorithm ssl.truststore.certificates ssl.truststore.location ssl.truststore.password
    ssl.truststore.type

    # DelegationTokenManagerConfigs
    delegation.token.expiry.check.interval.ms delegation.token.expiry.time.ms
    delegation.token.max.lifetime.ms delegation.token.secret.key
"""
KAFKA_BROKER_PROPERTIES = frozenset(name for line in _BY_CLASS.splitlines() if not line.lstrip().startswith("#")
                                    for name in line.split())

# Keys under a prefix: a listener's own setting (listener.name.<listener>.<setting>, and JAAS per
# mechanism), the settings Kafka hands to a remote storage plugin (remote.log.*.impl.prefix) and to
# a config provider (config.providers.<name>.*).
_LISTENER_KEY = re.compile(r"listener\.name\.[A-Za-z0-9_-]+\.(?:(?:gssapi|plain|scram-sha-256|scram-sha-512|oauthbearer)\.)?"
                           r"([a-z0-9.]+)")
_PLUGIN_PREFIXES = ("rlmm.config.", "rsm.config.", "config.providers.")


def known_kafka_property(key: str) -> bool:
    """Whether Kafka 4.3's broker knows ``key``."""
    if key in KAFKA_BROKER_PROPERTIES or key.startswith(_PLUGIN_PREFIXES):
        return True
    match = _LISTENER_KEY.fullmatch(key)
    return match is not None and match[1] in KAFKA_BROKER_PROPERTIES
