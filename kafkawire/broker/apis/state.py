"""What the request handlers share: the broker's settings, topics, groups and fetch machinery."""
from __future__ import annotations

from dataclasses import dataclass

from ..config import BrokerConfig
from ..fetch import FetchPurgatory
from ..fetch_sessions import FetchSessionCache
from ..groups import GroupCoordinator
from ..topics import TopicManager

__all__ = ["BrokerState"]


@dataclass
class BrokerState:
    config: BrokerConfig
    topics: TopicManager
    groups: GroupCoordinator
    port: int
    versions: dict[int, tuple[int, int]]  # API key -> (oldest, newest) served
    purgatory: FetchPurgatory
    sessions: FetchSessionCache

    def topic_name(self, topic_id) -> str | None:
        topic = self.topics.by_id.get(topic_id)
        return topic.name if topic is not None else None
