"""The producer, sans I/O: ``config``, ``partitioner`` (Kafka's murmur2, sticky partitions),
``memory`` (the BufferPool), ``delivery`` (record futures), ``batch`` and the ``accumulator`` (KIP-782)
that gathers records into batches for the sender (``kafkawire.client.aio.sender``)."""
