"""Kafka clients: a sans-IO core (state machines fed responses and time, emitting requests; no sockets,
deterministic to test), an asyncio layer that runs the core over connections, and a blocking facade.

Configuration uses Kafka's property names (snake_case attributes, dotted names via ``from_properties``;
the clients take either a config object, a mapping of dotted names, or keyword properties).

The public names, loaded on first use:

* ``AsyncProducer`` / ``AsyncConsumer`` (asyncio) and ``Producer`` / ``Consumer`` (blocking, on a
  loop thread of their own), with ``ProducerConfig`` / ``ConsumerConfig``.
* What they hand out: ``RecordMetadata`` (where a sent record landed), ``ConsumerRecord``,
  ``TopicPartition``.
* Errors: ``KafkaError`` (a broker error code), ``KafkaConnectionError`` and ``RequestTimedOut``,
  ``IncompatibleBrokerError``, ``BufferExhausted`` (no buffer.memory within max.block.ms),
  ``FetchError`` and its ``CorruptRecordException``, ``OffsetOutOfRangeException``,
  ``NoOffsetForPartitionException``, ``GroupError`` and its ``CommitFailedError``, ``ConfigError``.

The modules, core first: ``producer_config``, ``partitioner``, ``buffer_pool``, ``producer_batch``,
``accumulator`` (KIP-782); ``consumer_config``, ``memory_pool`` (KIP-81), ``fetch_session`` (KIP-227),
``fetcher`` (KIP-74, KIP-41, KIP-1178), ``assignors`` and ``group`` (classic group membership); then
``connection``, ``metadata``, ``producer``, ``consumer`` and ``sync``.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what __getattr__ loads, for type checkers
    from .buffer_pool import BufferExhausted as BufferExhausted
    from .common import TopicPartition as TopicPartition
    from .connection import IncompatibleBrokerError as IncompatibleBrokerError
    from .connection import KafkaConnectionError as KafkaConnectionError
    from .connection import KafkaError as KafkaError
    from .connection import RequestTimedOut as RequestTimedOut
    from .consumer import AsyncConsumer as AsyncConsumer
    from .consumer_config import ConsumerConfig as ConsumerConfig
    from .fetcher import ConsumerRecord as ConsumerRecord
    from .fetcher import CorruptRecordException as CorruptRecordException
    from .fetcher import FetchError as FetchError
    from .fetcher import NoOffsetForPartitionException as NoOffsetForPartitionException
    from .fetcher import OffsetOutOfRangeException as OffsetOutOfRangeException
    from .group import CommitFailedError as CommitFailedError
    from .group import GroupError as GroupError
    from .group import OffsetAndMetadata as OffsetAndMetadata
    from .metadata import UnknownTopicError as UnknownTopicError
    from .producer import AsyncProducer as AsyncProducer
    from .producer_batch import RecordMetadata as RecordMetadata
    from .producer_config import ConfigError as ConfigError
    from .producer_config import ProducerConfig as ProducerConfig
    from .sync import Consumer as Consumer
    from .sync import Producer as Producer

_EXPORTS = {
    "AsyncProducer": "producer", "AsyncConsumer": "consumer", "Producer": "sync", "Consumer": "sync",
    "ProducerConfig": "producer_config", "ConsumerConfig": "consumer_config", "ConfigError": "producer_config",
    "RecordMetadata": "producer_batch", "ConsumerRecord": "fetcher", "TopicPartition": "common",
    "KafkaError": "connection", "KafkaConnectionError": "connection", "RequestTimedOut": "connection",
    "IncompatibleBrokerError": "connection", "BufferExhausted": "buffer_pool", "FetchError": "fetcher",
    "CorruptRecordException": "fetcher", "OffsetOutOfRangeException": "fetcher",
    "NoOffsetForPartitionException": "fetcher", "CommitFailedError": "group", "GroupError": "group",
    "OffsetAndMetadata": "group", "UnknownTopicError": "metadata",
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
