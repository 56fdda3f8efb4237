"""The share consumer's sans-IO core (KIP-932, "queues for Kafka"): ``config`` (Kafka's share consumer
settings), ``record`` (records with their delivery count, and the acknowledgement types),
``acknowledgements`` (one partition's acknowledgements as ShareFetch/ShareAcknowledge batches),
``membership`` (the ShareGroupHeartbeat member), ``session`` (share sessions and their epochs),
``completed_fetch`` (the acquired records of one ShareFetch partition) and ``fetcher`` (what ties them
together: what to fetch and acknowledge, per broker, and what ``poll`` hands out).
"""
