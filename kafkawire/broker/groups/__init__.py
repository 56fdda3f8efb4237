"""Groups and their offsets: the classic group protocol (``classic``, its state in ``classic_state``),
Kafka 4's consumer groups (KIP-848: ``consumer``, with ``consumer_state``, ``consumer_store`` and the
server-side ``consumer_assignors``), Kafka Streams' groups (KIP-1071: the ``streams`` package),
committed offsets (``offsets`` over ``offsets_store``), DeleteGroups and OffsetDelete (``deletion``),
and the coordinator that owns them all (``coordinator``).

Nothing is imported here: a broker that serves no group loads none of it (``groups.coordinator`` is
imported where a coordinator is built)."""
