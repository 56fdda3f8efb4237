"""One share partition's acknowledgements, as ShareFetch and ShareAcknowledge carry them.

They are kept as ranges ``(first, last, type)`` in the order the application made them (a poll's
records in implicit mode are one range per run of offsets) and turned into the request's
AcknowledgementBatches only when sent: sorted, a later acknowledgement of an offset replacing an
earlier one, consecutive offsets of one type merged into one batch with one type, as Kafka's
``Acknowledgements.getAcknowledgementBatches`` does.
"""
from __future__ import annotations

from collections.abc import Iterator

__all__ = ["Acknowledgements", "AcknowledgementBatch"]

_FINAL = frozenset({1, 2, 3})  # ACCEPT, RELEASE, REJECT
AcknowledgementBatch = tuple[int, int, list[int]]  # first offset, last offset, types (one, or one per offset)


class Acknowledgements:
    """The acknowledgements of one partition not sent yet."""

    __slots__ = ("_ranges",)

    def __init__(self) -> None:
        self._ranges: list[tuple[int, int, int]] = []

    def add(self, offset: int, kind: int) -> None:
        ranges, kind = self._ranges, int(kind)
        if ranges and ranges[-1][1] == offset - 1 and ranges[-1][2] == kind:  # one record after another
            ranges[-1] = (ranges[-1][0], offset, kind)
        else:
            ranges.append((offset, offset, kind))

    def add_range(self, first: int, last: int, kind: int) -> None:
        if last >= first:
            self._ranges.append((first, last, int(kind)))

    def extend(self, other: Acknowledgements) -> None:
        """Take ``other``'s acknowledgements (made later than these: they win where both name an offset)."""
        self._ranges += other._ranges

    def merge(self, other: Acknowledgements) -> None:
        """Take ``other``'s acknowledgements (made earlier than these: these win where both name an offset)."""
        self._ranges[:0] = other._ranges

    def __bool__(self) -> bool:
        return bool(self._ranges)

    def __len__(self) -> int:
        return sum(last - first + 1 for first, last, _ in self._ranges)

    def has(self, kind: int) -> bool:
        return any(k == kind for _, _, k in self._ranges)

    def acknowledged_offsets(self) -> set[int]:
        """The offsets acknowledged for good (ACCEPT, RELEASE, REJECT: not gaps, nor RENEWs)."""
        return {offset for first, last, kind in self._normalized() if kind in _FINAL
                for offset in range(first, last + 1)}

    def batches(self) -> list[AcknowledgementBatch]:
        """The AcknowledgementBatches: sorted, the latest type of each offset, same-type runs merged."""
        out: list[AcknowledgementBatch] = []
        for first, last, kind in self._normalized():
            if out and out[-1][1] + 1 == first and out[-1][2] == [kind]:
                out[-1] = (out[-1][0], last, [kind])
            else:
                out.append((first, last, [kind]))
        return out

    def _normalized(self) -> Iterator[tuple[int, int, int]]:
        ranges = self._ranges
        if all(ranges[i][1] < ranges[i + 1][0] for i in range(len(ranges) - 1)):
            yield from ranges  # in order and disjoint: the usual case
            return
        latest: dict[int, int] = {}
        for first, last, kind in ranges:
            for offset in range(first, last + 1):
                latest[offset] = kind
        for offset in sorted(latest):
            yield offset, offset, latest[offset]
