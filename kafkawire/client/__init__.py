"""Kafka clients: sans-IO cores (``core``: state machines fed responses and time, emitting requests; no
sockets, deterministic to test), asyncio drivers that run them over connections (``aio``), and blocking
wrappers (``blocking``). Every exception is in ``errors``.

Configuration uses Kafka's property names (snake_case attributes, dotted names via ``from_properties``;
the clients take either a config object, a mapping of dotted names, or keyword properties).

The public names, loaded on first use:

* ``AsyncProducer`` / ``AsyncConsumer`` (asyncio) and ``Producer`` / ``Consumer`` (blocking, on a
  loop thread of their own), with ``ProducerConfig`` / ``ConsumerConfig``.
* ``AsyncShareConsumer`` / ``ShareConsumer`` (blocking): share groups (KIP-932, queues), with
  ``ShareConsumerConfig``, the ``ShareConsumerRecord`` they hand out (a ConsumerRecord with its
  ``delivery_count``) and ``AcknowledgeType`` (ACCEPT, RELEASE, REJECT, RENEW).
* ``AsyncAdminClient`` / ``AdminClient`` (blocking, with futures as confluent-kafka's) and ``AdminConfig``;
  the types their calls take and return are in ``kafkawire.client.admin``.
* What they hand out: ``RecordFuture`` (a sent record's outcome: awaitable, or ``result(timeout)``)
  and its ``RecordMetadata`` (where the record landed), ``ConsumerRecord``, ``TopicPartition``,
  ``OffsetAndMetadata``.
* Errors: ``KafkaError`` (a broker error code), ``KafkaConnectionError``, ``KafkaTimeoutError`` (a call
  out of time, naming the broker waited for and why) and its ``RequestTimedOut`` (one request),
  ``IncompatibleBrokerError``, ``UnknownTopicError``, ``BufferExhausted`` (no buffer.memory within
  max.block.ms), ``FetchError`` and its ``CorruptRecordException``, ``OffsetOutOfRangeException``,
  ``NoOffsetForPartitionException``, ``GroupError`` and its ``CommitFailedError``, ``ConfigError``,
  ``ProducerClosed`` (a send after close, or a record close could not deliver), and
  ``AuthenticationException`` (not retriable) with ``SaslAuthenticationException``,
  ``UnsupportedSaslMechanismException``, ``IllegalSaslStateException`` and ``SslAuthenticationException``;
  for transactions ``TransactionError`` and its kinds: ``ProducerFencedError`` and the other
  ``TransactionFatalError``s (close the producer), ``TransactionAbortableError`` (abort, go on),
  ``TransactionAbortedError`` (a record of an aborted transaction), ``TransactionTimeout`` and
  ``TransactionStateError``; ``ConsumerGroupMetadata`` is what ``send_offsets_to_transaction`` takes.

Security uses Kafka's settings too (``security.protocol``, ``ssl.*``, ``sasl.*``: see
``core.security_config``).
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what __getattr__ loads, for type checkers
    from .aio.admin.client import AsyncAdminClient as AsyncAdminClient
    from .aio.consumer import AsyncConsumer as AsyncConsumer
    from .aio.share_consumer import AsyncShareConsumer as AsyncShareConsumer
    from .aio.producer import AsyncProducer as AsyncProducer
    from .blocking import Consumer as Consumer
    from .blocking import Producer as Producer
    from .blocking import ShareConsumer as ShareConsumer
    from .blocking_admin import AdminClient as AdminClient
    from .core.admin.config import AdminConfig as AdminConfig
    from .core.consumer.config import ConsumerConfig as ConsumerConfig
    from .core.group.consumer_group_metadata import ConsumerGroupMetadata as ConsumerGroupMetadata
    from .core.consumer.record import ConsumerRecord as ConsumerRecord
    from .core.producer.delivery import RecordFuture as RecordFuture
    from .core.producer.delivery import RecordMetadata as RecordMetadata
    from .core.group.protocol import OffsetAndMetadata as OffsetAndMetadata
    from .core.producer.config import ProducerConfig as ProducerConfig
    from .core.share.config import ShareConsumerConfig as ShareConsumerConfig
    from .core.share.record import AcknowledgeType as AcknowledgeType
    from .core.share.record import ShareConsumerRecord as ShareConsumerRecord
    from .core.topic_partition import TopicPartition as TopicPartition
    from .errors import AuthenticationException as AuthenticationException
    from .errors import AuthorizationException as AuthorizationException
    from .errors import ClusterAuthorizationException as ClusterAuthorizationException
    from .errors import GroupAuthorizationException as GroupAuthorizationException
    from .errors import TopicAuthorizationException as TopicAuthorizationException
    from .errors import BufferExhausted as BufferExhausted
    from .errors import CommitFailedError as CommitFailedError
    from .errors import ConfigError as ConfigError
    from .errors import CorruptRecordException as CorruptRecordException
    from .errors import FetchError as FetchError
    from .errors import GroupError as GroupError
    from .errors import IllegalSaslStateException as IllegalSaslStateException
    from .errors import IncompatibleBrokerError as IncompatibleBrokerError
    from .errors import KafkaConnectionError as KafkaConnectionError
    from .errors import KafkaError as KafkaError
    from .errors import KafkaTimeoutError as KafkaTimeoutError
    from .errors import NoOffsetForPartitionException as NoOffsetForPartitionException
    from .errors import OffsetOutOfRangeException as OffsetOutOfRangeException
    from .errors import ProducerClosed as ProducerClosed
    from .errors import RequestTimedOut as RequestTimedOut
    from .errors import SaslAuthenticationException as SaslAuthenticationException
    from .errors import SslAuthenticationException as SslAuthenticationException
    from .errors import UnknownTopicError as UnknownTopicError
    from .errors import UnsupportedSaslMechanismException as UnsupportedSaslMechanismException
    from .errors import ProducerFencedError as ProducerFencedError
    from .errors import TransactionAbortableError as TransactionAbortableError
    from .errors import TransactionAbortedError as TransactionAbortedError
    from .errors import TransactionalIdAuthorizationError as TransactionalIdAuthorizationError
    from .errors import TransactionError as TransactionError
    from .errors import TransactionFatalError as TransactionFatalError
    from .errors import TransactionStateError as TransactionStateError
    from .errors import TransactionTimeout as TransactionTimeout

_ERRORS = ("AuthenticationException", "AuthorizationException", "ClusterAuthorizationException",
           "GroupAuthorizationException", "TopicAuthorizationException", "BufferExhausted", "CommitFailedError", "ConfigError",
           "CorruptRecordException", "FetchError", "GroupError", "IllegalSaslStateException",
           "IncompatibleBrokerError", "KafkaConnectionError", "KafkaError", "KafkaTimeoutError",
           "NoOffsetForPartitionException",
           "OffsetOutOfRangeException", "ProducerClosed", "RequestTimedOut", "SaslAuthenticationException",
           "SslAuthenticationException", "UnknownTopicError", "UnsupportedSaslMechanismException",
           "ProducerFencedError", "TransactionAbortableError", "TransactionAbortedError",
           "TransactionalIdAuthorizationError", "TransactionError", "TransactionFatalError", "TransactionStateError",
           "TransactionTimeout")
_EXPORTS = {
    "AsyncProducer": "aio.producer", "AsyncConsumer": "aio.consumer", "Producer": "blocking",
    "Consumer": "blocking", "ProducerConfig": "core.producer.config", "ConsumerConfig": "core.consumer.config",
    "RecordMetadata": "core.producer.delivery", "RecordFuture": "core.producer.delivery",
    "ConsumerRecord": "core.consumer.record",
    "TopicPartition": "core.topic_partition", "OffsetAndMetadata": "core.group.protocol",
    "ConsumerGroupMetadata": "core.group.consumer_group_metadata",
    "AsyncShareConsumer": "aio.share_consumer", "ShareConsumer": "blocking",
    "ShareConsumerConfig": "core.share.config", "ShareConsumerRecord": "core.share.record",
    "AcknowledgeType": "core.share.record",
    "AdminClient": "blocking_admin", "AsyncAdminClient": "aio.admin.client", "AdminConfig": "core.admin.config",
    **dict.fromkeys(_ERRORS, "errors"),
}

__all__ = sorted(_EXPORTS)


if not TYPE_CHECKING:  # type checkers see the imports above instead, and so flag a name not among them
    def __getattr__(name: str) -> Any:
        module = _EXPORTS.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{module}", __name__), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
