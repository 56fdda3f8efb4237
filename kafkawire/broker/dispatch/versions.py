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

__all__ = ["SERVED_APIS", "TRANSACTION_V2_VERSIONS", "with_transaction_version", "UPSTREAM_NEWEST", "SUPPORTED_VERSIONS", "UPSTREAM_VERSIONS", "served_versions"]

# API keys with a handler.
SERVED_APIS = (
    0,  # Produce
    1,  # Fetch
    2,  # ListOffsets
    3,  # Metadata
    8,  # OffsetCommit
    9,  # OffsetFetch
    10,  # FindCoordinator
    11,  # JoinGroup
    12,  # Heartbeat
    13,  # LeaveGroup
    14,  # SyncGroup
    15,  # DescribeGroups
    16,  # ListGroups
    17,  # SaslHandshake
    18,  # ApiVersions
    19,  # CreateTopics
    20,  # DeleteTopics
    21,  # DeleteRecords
    22,  # InitProducerId
    23,  # OffsetForLeaderEpoch
    24,  # AddPartitionsToTxn
    25,  # AddOffsetsToTxn
    26,  # EndTxn
    27,  # WriteTxnMarkers
    28,  # TxnOffsetCommit
    29,  # DescribeAcls
    30,  # CreateAcls
    31,  # DeleteAcls
    32,  # DescribeConfigs
    33,  # AlterConfigs
    35,  # DescribeLogDirs
    36,  # SaslAuthenticate
    37,  # CreatePartitions
    42,  # DeleteGroups
    43,  # ElectLeaders
    44,  # IncrementalAlterConfigs
    47,  # OffsetDelete
    50,  # DescribeUserScramCredentials
    51,  # AlterUserScramCredentials
    60,  # DescribeCluster
    61,  # DescribeProducers
    65,  # DescribeTransactions
    66,  # ListTransactions
    68,  # ConsumerGroupHeartbeat
    69,  # ConsumerGroupDescribe
    71,  # GetTelemetrySubscriptions
    72,  # PushTelemetry
    75,  # DescribeTopicPartitions
)

# The versions that need transaction version 2 (KIP-890 part 2): a cluster finalized below it serves
# the version before (Produce v12 adds partitions implicitly, EndTxn v5 bumps the epoch, TxnOffsetCommit
# v5 adds the group's offsets partition).
TRANSACTION_V2_VERSIONS = {0: 12, 26: 5, 28: 5}

# APIs that kafkawire's overlays (schemas/kip-1178/) take past Kafka 4.3: API key -> upstream's newest.
UPSTREAM_NEWEST = {1: 18}  # Fetch: v19 is KIP-1178's


def served_versions(upstream: bool = False) -> dict[int, tuple[int, int]]:
    """API key -> (oldest, newest) advertised; with ``upstream``, Kafka 4.3's ranges exactly."""
    served = {}
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
