"""Synthetic TCP connections for the tests of the capture's Kafka layer: real encoded requests and
responses (``Correlator``, ``encode_response``) in the order a client and a broker send them, cut into
TCP segments with chosen sequence numbers, and the ``Packet``s that carry them."""
from __future__ import annotations

import struct
from dataclasses import dataclass

from kafkawire.capture.model import ACK, FIN, PSH, SYN, Packet, connection_key
from kafkawire.framing import Correlator, encode_response, frame

CLIENT = ("10.0.0.1", 50000)
BROKER = ("10.0.0.2", 9092)
CONNECTION = connection_key(CLIENT[0], CLIENT[1], BROKER[0], BROKER[1])
WRAP = 1 << 32


@dataclass
class Message:
    sender: tuple
    data: bytes            # size prefix + frame
    correlation_id: int
    api_key: int
    api_version: int

    @property
    def direction(self) -> str:
        return "request" if self.sender == CLIENT else "response"


class Talk:
    """A conversation: real encoded requests and responses in the order they are sent."""

    def __init__(self, client_id: str = "test-client", first_id: int = 0):
        self.correlator = Correlator(client_id=client_id, first_correlation_id=first_id)
        self.messages: list[Message] = []

    def request(self, body, version: int, response=None) -> int:
        data = self.correlator.request(body, version)
        corr = struct.unpack_from(">i", data, 8)[0]
        self.messages.append(Message(CLIENT, data, corr, body.API_KEY, version))
        if response is not None:
            self.respond(body.API_KEY, version, corr, response)
        return corr

    def respond(self, key: int, version: int, corr: int, body) -> None:
        self.messages.append(Message(BROKER, encode_response(key, version, corr, body), corr, key, version))

    def raw(self, sender, payload: bytes) -> None:
        self.messages.append(Message(sender, frame(payload), -1, -1, -1))


@dataclass
class Segment:
    sender: tuple
    seq: int
    flags: int
    payload: bytes = b""
    missing: int = 0


def segments(messages: list[Message], mss=1448, client_isn: int = 1000, broker_isn: int = 7_000_000,
             syn: bool = True, fin: bool = True) -> list[Segment]:
    """TCP segments carrying ``messages`` in order; ``mss`` may be a function of the byte count left."""
    seq = {CLIENT: client_isn, BROKER: broker_isn}
    out: list[Segment] = []
    if syn:
        out += [Segment(CLIENT, client_isn, SYN), Segment(BROKER, broker_isn, SYN | ACK)]
    seq = {CLIENT: client_isn + 1, BROKER: broker_isn + 1}
    for message in messages:
        data, i = message.data, 0
        while i < len(data):
            step = mss(len(data) - i) if callable(mss) else mss
            out.append(Segment(message.sender, seq[message.sender] % WRAP, ACK | PSH, data[i:i + step]))
            seq[message.sender] += len(data[i:i + step])
            i += step
    if fin:
        out += [Segment(CLIENT, seq[CLIENT] % WRAP, FIN | ACK), Segment(BROKER, seq[BROKER] % WRAP, FIN | ACK)]
    return out


def packets(segs: list[Segment], ts_step: int = 1000) -> list[Packet]:
    out = []
    for index, seg in enumerate(segs):
        (src, sport), (dst, dport) = seg.sender, (BROKER if seg.sender == CLIENT else CLIENT)
        out.append(Packet(index, index * ts_step, src, sport, dst, dport, seg.seq % WRAP, 0, seg.flags, seg.payload,
                          seg.missing))
    return out
