"""Between stages 2 and 3, with a key log: a TLS connection's stream -> its plaintext stream
(``tls_connection``), from the key log's secrets (``key_log``), the handshake's choices (``handshake``),
the keys they make (``key_schedule``) and each direction's record protection (``record_protection``)."""
