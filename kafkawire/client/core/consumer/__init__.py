"""The consumer, sans I/O: ``config``, ``fetcher`` (KIP-74, KIP-41, KIP-1178) with its ``fetch_session``
(KIP-227), ``completed_fetch`` (one partition's answer, drained in order), ``aborted_transactions``
(read_committed), ``memory`` (KIP-81) and ``record`` (what poll hands out)."""
