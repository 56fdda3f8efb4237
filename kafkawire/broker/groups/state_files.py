"""The files the streams and share groups keep their state in (in the broker's data folder), named apart
from their stores so that a start can look for them without importing those groups' modules."""

__all__ = ["SHARE_GROUPS_FILE_NAME", "STREAMS_GROUPS_FILE_NAME"]

STREAMS_GROUPS_FILE_NAME = "streams-groups.jsonl"  # streams.store
SHARE_GROUPS_FILE_NAME = "share-groups.jsonl"  # share.store
