"""The files the groups keep their state in, named apart from their stores so that a start can look for
them without importing the groups' modules."""

__all__ = ["SHARE_GROUPS_FILE_NAME", "STREAMS_GROUPS_FILE_NAME", "GROUP_CONFIG_FILE_NAME", "OFFSETS_FOLDER_NAME"]

OFFSETS_FOLDER_NAME = "__consumer_offsets"  # the group coordinator's folder, in the broker's data folder
GROUP_CONFIG_FILE_NAME = "group-configs.json"  # group_configs, in the broker's data folder

STREAMS_GROUPS_FILE_NAME = "streams-groups.jsonl"  # streams.store, in the groups' folder (__consumer_offsets)
SHARE_GROUPS_FILE_NAME = "share-groups.jsonl"  # share.store, in the broker's data folder
