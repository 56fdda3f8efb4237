"""The client's sans-IO cores: state as data, fed responses and the time, emitting requests; no sockets,
no event loop, deterministic to test (``kafkawire.client.aio`` runs them over connections).

A package per concept: ``producer`` (batches, the accumulator, memory, the partitioner, record futures),
``consumer`` (the fetcher, fetch sessions, memory, read_committed), ``group`` (classic and KIP-848
membership, offsets, assignors), ``share`` (the share consumer: share group membership, share sessions, acknowledgements),
``transactions`` (the transactional producer's state machine) and
``admin`` (the admin client's requests and answers). What they share is here: ``properties`` (settings by
Kafka's names), ``network_config``, ``security_config``, ``sasl_client``, ``topic_partition`` and
``cluster_metadata``.
"""
