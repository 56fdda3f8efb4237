"""Topic names by topic id, as the responses of a capture resolve them (for requests that name topics by
id only). Its own module, free of Arrow, so that ``kafkawire show`` starts without pyarrow."""
from __future__ import annotations

__all__ = ["TopicNames"]


class TopicNames:
    """Topic names by topic id (as text), from the Metadata (v10+) and CreateTopics (v7+) responses the
    batcher has seen: a request that names topics by id only (Produce and Fetch v13+) still gets the name
    in its rows when the capture saw the id resolved. Bounded: the oldest ids are forgotten first."""

    def __init__(self, limit: int = 100_000):
        self.limit = limit
        self.names: dict[str, str] = {}

    def learn(self, body) -> None:
        for topic in getattr(body, "topics", None) or ():
            topic_id, name = getattr(topic, "topic_id", None), getattr(topic, "name", None)
            if name and topic_id is not None and topic_id.int != 0:
                self.names.pop(str(topic_id), None)
                self.names[str(topic_id)] = name
        while len(self.names) > self.limit:
            del self.names[next(iter(self.names))]

    def get(self, topic_id: str | None) -> str | None:
        return self.names.get(topic_id) if topic_id is not None else None
