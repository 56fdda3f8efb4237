"""The API versions this broker serves, advertised in ApiVersions.

Every API the handlers implement is served at every version of the specs (Kafka 4.3's ranges, whose
oldest versions are those Kafka 4.0 kept after KIP-896), with two rules:

- a latest version the spec marks unstable (``latestVersionUnstable``, InitProducerId v6 in 4.3) is
  not advertised, as Kafka does without ``unstable.api.versions.enable``;
- Fetch goes up to v19, kafkawire's KIP-1178 version (RemotePartitionMaxBytes, the version after Kafka
  4.3's newest, v18 being upstream's KIP-1166). ``served_versions(upstream=True)`` (the broker's
  ``--upstream-versions``) stops Fetch at v18 and so advertises exactly what a Kafka 4.3 broker does.
"""
from __future__ import annotations

from ... import messages
from ...messages import ApiKey

__all__ = ["SERVED_APIS", "TRANSACTION_V2_VERSIONS", "with_transaction_version", "UPSTREAM_NEWEST", "SUPPORTED_VERSIONS", "UPSTREAM_VERSIONS", "served_versions"]

# API keys with a handler.
SERVED_APIS = (
    ApiKey.PRODUCE,
    ApiKey.FETCH,
    ApiKey.LIST_OFFSETS,
    ApiKey.METADATA,
    ApiKey.OFFSET_COMMIT,
    ApiKey.OFFSET_FETCH,
    ApiKey.FIND_COORDINATOR,
    ApiKey.JOIN_GROUP,
    ApiKey.HEARTBEAT,
    ApiKey.LEAVE_GROUP,
    ApiKey.SYNC_GROUP,
    ApiKey.DESCRIBE_GROUPS,
    ApiKey.LIST_GROUPS,
    ApiKey.SASL_HANDSHAKE,
    ApiKey.API_VERSIONS,
    ApiKey.CREATE_TOPICS,
    ApiKey.DELETE_TOPICS,
    ApiKey.DELETE_RECORDS,
    ApiKey.INIT_PRODUCER_ID,
    ApiKey.OFFSET_FOR_LEADER_EPOCH,
    ApiKey.ADD_PARTITIONS_TO_TXN,
    ApiKey.ADD_OFFSETS_TO_TXN,
    ApiKey.END_TXN,
    ApiKey.WRITE_TXN_MARKERS,
    ApiKey.TXN_OFFSET_COMMIT,
    ApiKey.DESCRIBE_ACLS,
    ApiKey.CREATE_ACLS,
    ApiKey.DELETE_ACLS,
    ApiKey.DESCRIBE_CONFIGS,
    ApiKey.ALTER_CONFIGS,
    ApiKey.DESCRIBE_LOG_DIRS,
    ApiKey.ALTER_REPLICA_LOG_DIRS,
    ApiKey.SASL_AUTHENTICATE,
    ApiKey.CREATE_PARTITIONS,
    ApiKey.DELETE_GROUPS,
    ApiKey.ELECT_LEADERS,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS,
    ApiKey.LIST_PARTITION_REASSIGNMENTS,
    ApiKey.INCREMENTAL_ALTER_CONFIGS,
    ApiKey.OFFSET_DELETE,
    ApiKey.CREATE_DELEGATION_TOKEN,
    ApiKey.RENEW_DELEGATION_TOKEN,
    ApiKey.EXPIRE_DELEGATION_TOKEN,
    ApiKey.DESCRIBE_DELEGATION_TOKEN,
    ApiKey.DESCRIBE_CLIENT_QUOTAS,
    ApiKey.ALTER_CLIENT_QUOTAS,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
    ApiKey.DESCRIBE_CLUSTER,
    ApiKey.DESCRIBE_QUORUM,
    ApiKey.UPDATE_FEATURES,
    ApiKey.DESCRIBE_PRODUCERS,
    ApiKey.DESCRIBE_TRANSACTIONS,
    ApiKey.LIST_TRANSACTIONS,
    ApiKey.CONSUMER_GROUP_HEARTBEAT,
    ApiKey.CONSUMER_GROUP_DESCRIBE,
    ApiKey.STREAMS_GROUP_HEARTBEAT,
    ApiKey.STREAMS_GROUP_DESCRIBE,
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS,
    ApiKey.PUSH_TELEMETRY,
    ApiKey.LIST_CONFIG_RESOURCES,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS,
    ApiKey.SHARE_GROUP_HEARTBEAT,
    ApiKey.SHARE_GROUP_DESCRIBE,
    ApiKey.SHARE_FETCH,
    ApiKey.SHARE_ACKNOWLEDGE,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS,
    ApiKey.DELETE_SHARE_GROUP_OFFSETS,
)

# The versions that need transaction version 2 (KIP-890 part 2): a cluster finalized below it serves
# the version before (Produce v12 adds partitions implicitly, EndTxn v5 bumps the epoch, TxnOffsetCommit
# v5 adds the group's offsets partition).
TRANSACTION_V2_VERSIONS: dict[int, int] = {ApiKey.PRODUCE: 12, ApiKey.END_TXN: 5, ApiKey.TXN_OFFSET_COMMIT: 5}

# APIs that kafkawire's overlays (schemas/kip-1178/) take past Kafka 4.3: API key -> upstream's newest.
UPSTREAM_NEWEST: dict[int, int] = {ApiKey.FETCH: 18}  # v19 is KIP-1178's


def served_versions(upstream: bool = False) -> dict[int, tuple[int, int]]:
    """API key -> (oldest, newest) advertised; with ``upstream``, Kafka 4.3's ranges exactly."""
    served: dict[int, tuple[int, int]] = {}
    for key in SERVED_APIS:
        info = messages.api(key)
        low, high = info.valid_versions
        if upstream:
            high = min(high, UPSTREAM_NEWEST.get(key, high))
        if info.latest_version_unstable and high == info.max_version:
            high -= 1
        served[key] = (low, high)
    return served


def with_transaction_version(versions: dict[int, tuple[int, int]], level: int) -> dict[int, tuple[int, int]]:
    """``versions`` as a cluster with ``transaction.version`` finalized at ``level`` serves them."""
    if level >= 2:
        return versions
    capped = dict(versions)
    for key, first_v2 in TRANSACTION_V2_VERSIONS.items():
        low, high = capped[key]
        capped[key] = (low, min(high, first_v2 - 1))
    return capped


SUPPORTED_VERSIONS = served_versions()
UPSTREAM_VERSIONS = served_versions(upstream=True)
