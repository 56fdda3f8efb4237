"""ShareSession: the share session with one broker, as Kafka's ``ShareSessionHandler`` keeps it.

Epoch 0 opens the session with every partition the member fetches from that broker (and may carry no
acknowledgements); each answered request moves the epoch on (1, 2, ... wrapping to 1 after 2**31 - 1),
and later requests name only the partitions added (or acknowledged) and forget those gone. Epoch -1
closes it. A session error (SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH) or a lost request
starts afresh at epoch 0: one request at a time per broker, so the epochs stay in step.
"""
from __future__ import annotations

import uuid

from kafkawire.error_codes import ErrorCode

from ..properties import INT32_MAX
from ..topic_partition import TopicPartition

__all__ = ["ShareSession", "INITIAL_EPOCH", "FINAL_EPOCH", "SESSION_ERRORS"]

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
SESSION_ERRORS = frozenset({ErrorCode.SHARE_SESSION_NOT_FOUND, ErrorCode.INVALID_SHARE_SESSION_EPOCH})


class ShareSession:
    """``partitions``: what the broker's session holds (as of the last answered request)."""

    def __init__(self, node: int):
        self.node = node
        self.epoch = INITIAL_EPOCH
        self.partitions: dict[TopicPartition, uuid.UUID] = {}

    @property
    def is_open(self) -> bool:
        """Answered once: acknowledgements may ride on its requests."""
        return self.epoch > INITIAL_EPOCH

    def changes(self, wanted: dict[TopicPartition, uuid.UUID]
                ) -> tuple[dict[TopicPartition, uuid.UUID], dict[TopicPartition, uuid.UUID]]:
        """(partitions to name, partitions to forget) for a ShareFetch wanting ``wanted``: every one in a
        full request, else the ones the session lacks."""
        if not self.is_open:
            return dict(wanted), {}
        added = {tp: topic_id for tp, topic_id in wanted.items() if self.partitions.get(tp) != topic_id}
        forgotten = {tp: topic_id for tp, topic_id in self.partitions.items() if wanted.get(tp) != topic_id}
        return added, forgotten

    def fetched(self, wanted: dict[TopicPartition, uuid.UUID]) -> None:
        """A ShareFetch for ``wanted`` was answered without a session error."""
        self.partitions = dict(wanted)
        self.advance()

    def advance(self) -> None:
        """A request was answered: the next carries the next epoch."""
        self.epoch = 1 if self.epoch >= INT32_MAX else self.epoch + 1

    def reset(self) -> None:
        """Start afresh (a session error, or a request lost)."""
        self.epoch = INITIAL_EPOCH
        self.partitions = {}
