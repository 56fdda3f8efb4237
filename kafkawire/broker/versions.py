"""The API versions this broker serves, advertised in ApiVersions.

Each range is the specs' range narrowed to what the handlers implement, with the oldest versions
removed as Kafka 4.0 removed them (KIP-896): Produce before v3 and Fetch before v4 (message formats
0 and 1), ListOffsets v0, OffsetCommit before v2, OffsetFetch v0, CreateTopics before v2,
DeleteTopics v0 and DescribeConfigs v0.
"""
from __future__ import annotations

from .. import messages

__all__ = ["SUPPORTED_VERSIONS", "OLDEST"]

# API key -> the oldest version served (the newest is the specs' newest).
OLDEST = {
    18: 0,  # ApiVersions
    3: 0,  # Metadata
    0: 3,  # Produce: record batch v2 only
    1: 4,  # Fetch: record batch v2 only
    2: 1,  # ListOffsets
    19: 2,  # CreateTopics
    20: 1,  # DeleteTopics
    32: 1,  # DescribeConfigs
    22: 0,  # InitProducerId
    10: 0,  # FindCoordinator
    11: 0,  # JoinGroup
    14: 0,  # SyncGroup
    12: 0,  # Heartbeat
    13: 0,  # LeaveGroup
    8: 2,  # OffsetCommit
    9: 1,  # OffsetFetch
    16: 0,  # ListGroups
    15: 0,  # DescribeGroups
    60: 0,  # DescribeCluster
}

SUPPORTED_VERSIONS = {key: (oldest, messages.api(key).valid_versions[1]) for key, oldest in OLDEST.items()}
