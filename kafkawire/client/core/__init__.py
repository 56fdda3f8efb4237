"""The client's sans-IO cores: state as data, fed responses and the time, emitting requests; no sockets,
no event loop, deterministic to test (``kafkawire.client.aio`` runs them over connections).

Producer: ``producer_config``, ``partitioner``, ``producer_memory`` (the BufferPool), ``delivery``
(record futures), ``producer_batch``, ``accumulator`` (KIP-782); transactions (KIP-98, KIP-447,
KIP-890): ``transaction_state``, ``transaction_errors``, ``transaction_requests``,
``transaction_manager``, ``consumer_group_metadata``. Consumer: ``consumer_config``,
``consumer_memory`` (KIP-81), ``fetch_session`` (KIP-227), ``completed_fetch``, ``aborted_transactions``
(read_committed) and ``consumer_record``,
``fetcher`` (KIP-74, KIP-41, KIP-1178); classic groups: ``assignors``, ``group_protocol``,
``group_requests``, ``group_membership``, ``group_member``. Both: ``properties`` (settings by Kafka's
names), ``topic_partition``, ``cluster_metadata``.
"""
