"""The admin client's transaction calls (a part of AsyncAdminClient, ``aio.admin``): describe_transactions,
sent to each transactional id's coordinator, and list_transactions, sent to every broker (each lists the
transactions it coordinates)."""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from kafkawire.messages import DescribeTransactionsRequest, ListTransactionsRequest

from ...core.admin import transactions
from ...core.admin.transactions import TransactionListing
from ..connection import BrokerConnection
from .calls import AdminPart, unique
from .router import TRANSACTION

__all__ = ["TransactionAdmin"]


class TransactionAdmin(AdminPart):
    """describe_transactions and list_transactions."""

    async def describe_transactions(self, transactional_ids: Sequence[str], *,
                                    request_timeout: float | None = None) -> dict[str, object]:
        """``{transactional id: TransactionDescription or exception}`` (TRANSACTIONAL_ID_NOT_FOUND)."""
        async def send(connection: BrokerConnection, node: int, batch: list[str]) -> dict[str, object]:
            version = connection.api_version(DescribeTransactionsRequest.API_KEY)
            response = await connection.send(transactions.describe_transactions_request(batch), version)
            return transactions.read_describe_transactions(response, node)

        async def attempt(pending: list[str]) -> dict[str, object]:
            return await self._router.per_coordinator(TRANSACTION, pending, send)
        return await self._router.run(unique(transactional_ids, "transactional id"), attempt,
                                      self._calls.timeout_ms(request_timeout), "describe_transactions")

    async def list_transactions(self, *, states: Iterable[str] = (), producer_ids: Iterable[int] = (),
                                duration_ms: int | None = None, transactional_id_pattern: str | None = None,
                                request_timeout: float | None = None) -> list[TransactionListing]:
        """The transactions of every broker, optionally only those in ``states`` (Ongoing, ...), of
        ``producer_ids``, open longer than ``duration_ms``, or whose id matches a regular expression.
        Raises the first broker's error if any broker cannot list."""
        states, producer_ids = list(states), list(producer_ids)
        listings, errors = await self._calls.on_every_broker(
            ListTransactionsRequest.API_KEY,
            lambda version: transactions.list_transactions_request(version, states, producer_ids, duration_ms,
                                                                   transactional_id_pattern),
            transactions.read_list_transactions, request_timeout, "list_transactions")
        if errors:
            raise errors[0]
        return listings
