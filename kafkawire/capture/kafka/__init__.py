"""Stage 3, one connection's stream -> Kafka frames, problems and its summary: the connection
(``kafka_connection``), each direction's framing and resync (``kafka_framing``, ``resync``), responses
paired with requests (``correlation``), SASL (``authentication``) and TLS ClientHellos (``tls_hello``)."""
