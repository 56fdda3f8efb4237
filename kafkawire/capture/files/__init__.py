"""Stage 1, capture files -> ``Packet``: the pcap and pcapng readers (``packets``, ``pcap_reader``,
``pcapng_reader``, ``packet_headers``, and the C loop ``_packets.c``), the files a run names (``inputs``),
their byte-range splits (``splits``), payloads left in their files (``payloads``), and captures behind a
URI (``remote_files``, ``remote_reading``, ``remote_payloads``)."""
