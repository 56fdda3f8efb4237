"""The file the transaction coordinator keeps its state in, named apart from its log so that a start can
look for it without importing the coordinator."""

__all__ = ["TRANSACTION_STATE_FILE_NAME"]

TRANSACTION_STATE_FILE_NAME = "transaction-state.jsonl"  # state_log's, in the broker's data folder
