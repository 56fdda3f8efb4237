"""The Fetch path's own parts (the handler is ``apis.fetch``):

- ``reads``: KIP-74's read loop over the partitions, fetches parked until MinBytes or MaxWaitMs, the
  remote tier;
- ``purgatory``: the parked fetches, watched by partition (appends wake them);
- ``sessions``: fetch sessions (KIP-227), full and incremental, in a bounded cache;
- ``response``: the FetchResponse built from the reads, its records left as sendfile pieces.
"""
