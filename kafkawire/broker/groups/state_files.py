"""The files the streams and share groups keep their state in, named apart from their stores so that a
start can look for them without importing those groups' modules."""

__all__ = ["SHARE_GROUPS_FILE_NAME", "STREAMS_GROUPS_FILE_NAME"]

STREAMS_GROUPS_FILE_NAME = "streams-groups.jsonl"  # streams.store, in the groups' folder (__consumer_offsets)
SHARE_GROUPS_FILE_NAME = "share-groups.jsonl"  # share.store, in the broker's data folder
