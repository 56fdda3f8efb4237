"""The values passed between the capture stages: packets, stream pieces, Kafka frames, problems and
connection summaries.

The stages are plain Python and know nothing of Spark; a folder each:

    files/      capture files and splits  -> Packet (packets: pcap_reader, pcapng_reader, packet_headers;
                                             splits, inputs, payloads, remote_files/reading/payloads)
    tcp/        one connection's packets  -> StreamData / StreamGap / StreamEnd per direction
                                             (tcp_reassembly)
    tls/        a TLS connection's stream -> its plaintext stream, given a key log (tls_connection:
                                             key_log, handshake, key_schedule, record_protection)
    kafka/      one connection's stream   -> KafkaFrame / Problem / ConnectionSummary (kafka_connection:
                                             kafka_framing and resync, correlation, authentication,
                                             tls_hello)
    tables/     KafkaFrame / Problem /    -> rows of the output tables (rows: table_schemas, table_sets,
                ConnectionSummary            frame_decoding, joins, share_joins, bodies, topic_names,
                                             column_table, record_table)
    reporting/  the tables                -> a summary (report, report_arrow, transactions, shares)

``streaming`` chains the first three (with ``tls`` where there is a key log) in this process
(``kafkawire show``, in ``terminal/``).

``kafkawire.capture_spark`` runs them inside Spark: packets in one pass over the splits, then a
shuffle by ``Packet.connection`` so that one task sees each connection's packets in capture order.
"""
from __future__ import annotations

from typing import NamedTuple

ORDER_STRIDE = 1 << 40  # Packet.order = file_index * ORDER_STRIDE + record offset
# TCP flags, as in the header's flags byte.
FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10


def endpoint(address: str, port: int) -> str:
    """``1.2.3.4:9092`` or ``[::1]:9092``."""
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def connection_key(src: str, sport: int, dst: str, dport: int) -> str:
    """Both directions of a TCP connection share one key: the two endpoints, the smaller first."""
    a, b = endpoint(src, sport), endpoint(dst, dport)
    return f"{a}-{b}" if (src, sport) <= (dst, dport) else f"{b}-{a}"


class Packet(NamedTuple):
    """One captured TCP segment.

    ``order`` sorts packets in capture order across every file of a run: the file's index in the run
    times 2**40 plus the byte offset of the packet's record in its file.
    """
    order: int
    ts_ns: int              # capture time, nanoseconds since the epoch
    src: str                # IP address text
    sport: int
    dst: str
    dport: int
    seq: int                # raw 32-bit sequence number
    ack: int
    flags: int              # the TCP flags byte
    payload: bytes          # the captured TCP payload
    missing: int = 0        # payload bytes on the wire but not captured (snap length)

    @property
    def connection(self) -> str:
        return connection_key(self.src, self.sport, self.dst, self.dport)

    @property
    def sender(self) -> str:
        return endpoint(self.src, self.sport)


class PacketRef(NamedTuple):
    """A ``Packet`` whose payload was left in its file: ``payload_length`` bytes at ``payload_offset``
    of the capture ``order // ORDER_STRIDE`` of the run (``PayloadReader`` reads them back). The other
    fields are the Packet's, in its order."""
    order: int
    ts_ns: int
    src: str
    sport: int
    dst: str
    dport: int
    seq: int
    ack: int
    flags: int
    payload_offset: int
    payload_length: int
    missing: int = 0



class StreamData(NamedTuple):
    """In-order bytes of one direction; ``offset`` counts from the first byte seen in that direction."""
    sender: str
    offset: int
    ts_ns: int
    data: bytes


class StreamGap(NamedTuple):
    """Bytes of one direction that were never captured (loss, snap length, a capture started late)."""
    sender: str
    offset: int
    length: int
    ts_ns: int
    reason: str


class StreamEnd(NamedTuple):
    """One direction closed (FIN or RST) or the connection's packets ran out (``reason``)."""
    sender: str
    offset: int
    ts_ns: int
    reason: str


class KafkaFrame(NamedTuple):
    """One size-prefixed Kafka frame, a request or a response, with what its header says.

    For a response, ``api_key``/``api_version`` come from the request it answers, and ``request`` is that
    request's frame (None when the response could not be matched; then the response is not decoded).
    SaslHandshake and SaslAuthenticate frames carry the SASL mechanism of their exchange and the user
    its client named, where the capture shows them (``authentication``).
    """
    connection: str
    direction: str          # "request" or "response"
    client: str             # the client's endpoint
    broker: str             # the broker's endpoint
    ts_ns: int              # when the frame's first byte was captured
    end_ts_ns: int          # when its last byte was captured
    offset: int             # stream offset of the size prefix
    size: int               # bytes after the size prefix
    api_key: int | None
    api_version: int | None
    correlation_id: int
    client_id: str | None   # requests only
    frame: bytes            # the frame without its size prefix
    request: "KafkaFrame | None" = None
    sasl_mechanism: str | None = None
    sasl_user: str | None = None


class Problem(NamedTuple):
    """Something the decoder could not take at face value, with a reason a person can act on.

    ``kind`` is one of: gap, resync, truncated_frame, undecodable, trailing_bytes, unmatched_response,
    unanswered_request, retransmission_conflict, tls, not_kafka, oversized_frame.
    """
    connection: str
    direction: str | None
    ts_ns: int
    kind: str
    reason: str
    offset: int | None = None
    length: int | None = None
    api_key: int | None = None
    api_version: int | None = None
    correlation_id: int | None = None


class ConnectionSummary(NamedTuple):
    """One TCP connection (one use of its addresses and ports: a reused 4-tuple gives one per use), as
    the capture shows it: when, how many frames, TLS and SASL authentication.

    ``tls_*``: a TLS record opened the connection; the server name (SNI) and the highest TLS version its
    ClientHello offered, and whether it was decrypted (a key log had its secrets: ``capture.tls``) or
    not (and then not decoded). ``sasl_*``: the mechanism of its last SASL
    exchange, the user the client named, the handshake version (0: raw tokens followed it), the
    outcome (``authentication``: authenticated, failed or incomplete; null without SASL) and the
    error code of a failure; ``authentications`` counts the exchanges (KIP-368 re-authentication
    makes more than one).
    """
    connection: str
    client: str | None      # None when the roles were never decided (not Kafka)
    broker: str | None
    ts_ns: int              # the first event of the connection
    end_ts_ns: int          # its last
    requests: int
    responses: int
    tls: bool
    tls_server_name: str | None
    tls_version: str | None
    sasl_mechanism: str | None
    sasl_user: str | None
    sasl_handshake_version: int | None
    authentication: str | None
    sasl_error_code: int | None
    authentications: int
    tls_decrypted: bool | None = None  # TLS: whether a key log decrypted it (None without TLS)
