"""Transactions for the admin client: DescribeTransactions (sent to each transactional id's coordinator)
and ListTransactions (sent to every broker, each listing the transactions it coordinates)."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kafkawire.messages import (
    DescribeTransactionsRequest, DescribeTransactionsResponse, ListTransactionsRequest, ListTransactionsResponse,
)

from ...errors import KafkaError
from ..topic_partition import TopicPartition
from .errors import error_for, outcome_of

__all__ = ["TransactionDescription", "TransactionListing", "describe_transactions_request",
           "read_describe_transactions", "list_transactions_request", "read_list_transactions"]


@dataclass(frozen=True)
class TransactionDescription:
    transactional_id: str
    coordinator_id: int
    state: str  # Kafka's TransactionState names: Empty, Ongoing, PrepareCommit, CompleteAbort, ...
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_start_time_ms: int | None  # None: no transaction open
    topic_partitions: frozenset[TopicPartition]


@dataclass(frozen=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str


def describe_transactions_request(transactional_ids: Sequence[str]) -> DescribeTransactionsRequest:
    return DescribeTransactionsRequest(transactional_ids=list(transactional_ids))


def read_describe_transactions(response: DescribeTransactionsResponse, coordinator_id: int) -> dict[str, object]:
    found: dict[str, object] = {}
    for state in response.transaction_states:
        failure = outcome_of(state.error_code, None, f"transactional id {state.transactional_id!r}",
                             coordinator=True)
        if failure is not None:
            found[state.transactional_id] = failure
            continue
        found[state.transactional_id] = TransactionDescription(
            state.transactional_id, coordinator_id, state.transaction_state, state.producer_id, state.producer_epoch,
            state.transaction_timeout_ms,
            state.transaction_start_time_ms if state.transaction_start_time_ms >= 0 else None,
            frozenset(TopicPartition(t.topic, p) for t in state.topics for p in t.partitions))
    return found


def list_transactions_request(version: int, states: Iterable[str], producer_ids: Iterable[int],
                              duration_ms: int | None, transactional_id_pattern: str | None
                              ) -> ListTransactionsRequest:
    if duration_ms is not None and version < 1:
        raise ValueError("filtering transactions by duration needs ListTransactions v1 (KIP-994)")
    if transactional_id_pattern is not None and version < 2:
        raise ValueError("filtering transactions by id pattern needs ListTransactions v2 (KIP-1152)")
    return ListTransactionsRequest(state_filters=list(states), producer_id_filters=list(producer_ids),
                                   duration_filter=duration_ms if duration_ms is not None else -1,
                                   transactional_id_pattern=transactional_id_pattern)


def read_list_transactions(response: ListTransactionsResponse) -> list[TransactionListing] | KafkaError:
    if response.error_code:
        return error_for(response.error_code, None, "ListTransactions")
    return [TransactionListing(t.transactional_id, t.producer_id, t.transaction_state)
            for t in response.transaction_states]
