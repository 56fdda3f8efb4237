"""Kafka's ACL enums with their wire values (``org.apache.kafka.common.resource.ResourceType``,
``PatternType``, ``acl.AclOperation``, ``AclPermissionType``), as CreateAcls, DescribeAcls and DeleteAcls
carry them: shared by the broker's authorizer and the client's admin calls. ``ResourceType.BROKER`` is
confluent-kafka's name for CLUSTER."""
from __future__ import annotations

import enum

__all__ = ["ResourceType", "ResourcePatternType", "AclOperation", "AclPermissionType", "TOPIC_OPERATIONS"]


class _Named(enum.IntEnum):
    @classmethod
    def of(cls, value):
        """From an enum, its value, or its name in any case."""
        if isinstance(value, str):
            try:
                return cls[value.strip().upper()]
            except KeyError:
                raise ValueError(f"unknown {cls.__name__} {value!r}") from None
        try:
            return cls(value)
        except ValueError:
            return cls(0)  # UNKNOWN


class ResourceType(_Named):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    BROKER = 4  # confluent-kafka's name for the cluster
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class ResourcePatternType(_Named):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2  # filters only: literal, wildcard and prefixed patterns that match the name
    LITERAL = 3
    PREFIXED = 4


class AclOperation(_Named):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(_Named):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# the operations a topic supports, whose bits Metadata and DescribeTopicPartitions report as authorized
TOPIC_OPERATIONS = (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE,
                    AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS,
                    AclOperation.ALTER_CONFIGS)
