"""The client's asyncio drivers: they run the sans-IO cores (``kafkawire.client.core``) over broker
connections. ``connection`` (framing, version negotiation, KIP-81 read backpressure) and
``connection_manager``, ``metadata_refresh``, ``producer`` with its ``sender`` (and
``transaction_driver``), ``consumer`` with its ``fetch_driver`` and ``group_driver``, ``share_consumer``
with its ``share_driver``, ``waiting``, and the ``admin`` client.
"""
