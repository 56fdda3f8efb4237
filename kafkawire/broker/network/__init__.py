"""The broker's side of the sockets:

- ``listeners``: Kafka's ``listeners``, ``advertised.listeners`` and the security protocol map;
- ``connection``: one client connection (framing, TLS and SASL, one request at a time, responses);
- ``connection_limits`` (``max.connections``, per IP, descriptors) and ``request_memory``
  (``queued.max.request.bytes``, KIP-72): what the broker accepts and holds;
- ``sending``: a response's pieces written to the socket, file slices with sendfile(2);
- ``faults``: errors, drops, latency and bandwidth injected on command;
- ``tap``: the broker's own traffic written as pcapng.
"""
