"""The admin client's public names in one place, as ``confluent_kafka.admin`` gathers them: the clients
(``AdminClient``, blocking with futures; ``AsyncAdminClient``, asyncio), their settings (``AdminConfig``)
and every type a call takes or returns.

::

    from kafkawire.client.admin import AdminClient, NewTopic, OffsetSpec
"""
from __future__ import annotations

from .aio.admin.client import AsyncAdminClient
from .blocking_admin import AdminClient
from .core.admin.acls import (
    AclBinding, AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType, ResourceType,
)
from .core.admin.client_quotas import (
    ClientQuotaAlteration, ClientQuotaEntity, ClientQuotaFilter, ClientQuotaFilterComponent, MatchType,
)
from .core.admin.config import AdminConfig
from .core.admin.delegation_tokens import DelegationToken
from .core.admin.groups import (
    ConsumerGroupDescription, ConsumerGroupListing, ConsumerGroupState, ConsumerGroupTopicPartitions,
    ConsumerGroupType, ListConsumerGroupsResult, MemberAssignment, MemberDescription,
)
from .core.admin.partitions import DeletedRecords, IsolationLevel, ListOffsetsResultInfo, OffsetSpec, ProducerState
from .core.admin.reassignments import ElectionType, PartitionReassignment
from .core.admin.resource_configs import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigResourceType, ConfigSource
from .core.admin.scram import (
    ScramCredentialInfo, ScramMechanism, UserScramCredentialDeletion, UserScramCredentialsDescription,
    UserScramCredentialUpsertion,
)
from .core.admin.share_groups import (
    ListShareGroupsResult, ShareGroupDescription, ShareGroupListing, ShareMemberDescription, SharePartitionOffsetInfo,
)
from .core.admin.topics import (
    DescribeClusterResult, NewPartitions, NewTopic, Node, TopicDescription, TopicPartitionInfo,
)
from .core.admin.transactions import TransactionDescription, TransactionListing
from .core.group.protocol import OffsetAndMetadata
from .core.topic_partition import TopicPartition

__all__ = [
    "AdminClient", "AsyncAdminClient", "AdminConfig",
    "NewTopic", "NewPartitions", "Node", "TopicDescription", "TopicPartitionInfo", "DescribeClusterResult",
    "ConfigResource", "ConfigResourceType", "ConfigEntry", "ConfigSource", "AlterConfigOpType",
    "OffsetSpec", "IsolationLevel", "ListOffsetsResultInfo", "DeletedRecords", "ProducerState",
    "ElectionType", "PartitionReassignment",
    "ConsumerGroupState", "ConsumerGroupType", "ConsumerGroupListing", "ListConsumerGroupsResult",
    "ConsumerGroupDescription", "MemberDescription", "MemberAssignment", "ConsumerGroupTopicPartitions",
    "ShareGroupListing", "ListShareGroupsResult", "ShareGroupDescription", "ShareMemberDescription",
    "SharePartitionOffsetInfo",
    "TransactionDescription", "TransactionListing",
    "AclBinding", "AclBindingFilter", "AclOperation", "AclPermissionType", "ResourceType", "ResourcePatternType",
    "ScramMechanism", "ScramCredentialInfo", "UserScramCredentialsDescription", "UserScramCredentialUpsertion",
    "UserScramCredentialDeletion", "DelegationToken",
    "ClientQuotaEntity", "ClientQuotaFilter", "ClientQuotaFilterComponent", "ClientQuotaAlteration", "MatchType",
    "TopicPartition", "OffsetAndMetadata",
]
