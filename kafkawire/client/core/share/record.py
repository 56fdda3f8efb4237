"""What the share consumer hands out: ``ShareConsumerRecord`` (a ConsumerRecord with the delivery
count the broker acquired it with) and ``AcknowledgeType`` (Kafka's, with the values on the wire)."""
from __future__ import annotations

import enum
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from ..consumer.record import ConsumerRecord, _short

__all__ = ["ShareConsumerRecord", "AcknowledgeType", "GAP"]

GAP = 0  # an acquired offset without a record (a control record, a compacted gap): acknowledged as such


class AcknowledgeType(enum.IntEnum):
    """How a record is acknowledged: ACCEPT (done), RELEASE (deliver it again, maybe to another member),
    REJECT (never deliver it again), RENEW (KIP-1222: keep it acquired for another lock duration; it
    must still be acknowledged with one of the others)."""

    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


class ShareConsumerRecord(ConsumerRecord):
    """A ConsumerRecord with ``delivery_count``: how many times the share group has handed it out (1
    the first time; more after a RELEASE, or after a lock expired on another member)."""

    __slots__ = ()

    if TYPE_CHECKING:
        @property
        def delivery_count(self) -> int: ...
    else:
        delivery_count = property(itemgetter(11), doc="Times the record has been delivered, this one included.")

    @classmethod
    def of(cls, record: tuple[Any, ...], delivery_count: int) -> ShareConsumerRecord:
        """From a ConsumerRecord's row (``RecordBatch.rows``' layout) and its delivery count."""
        return tuple.__new__(cls, (*record, delivery_count))

    def __reduce__(self) -> tuple[Any, ...]:
        return (ShareConsumerRecord.of, (tuple(self[:11]), self.delivery_count))

    def __repr__(self) -> str:
        return (f"ShareConsumerRecord(topic={self.topic!r}, partition={self.partition}, offset={self.offset}, "
                f"timestamp={self.timestamp}, key={self.key!r}, value={_short(self.value)}, "
                f"headers={list(self.headers)!r}, delivery_count={self.delivery_count})")
