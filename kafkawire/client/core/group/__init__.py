"""A consumer's group, sans I/O: a ``member`` (the coordinator, subscription, assignment, events and
clocks) with its ``offsets`` (commits and offset fetches), joined by one of two protocols side by side:
``classic`` (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, the leader's assignments; with ``rebalance``,
``assignors``, ``assignor_base`` and ``sticky_assignor``) or KIP-848's ``consumer_protocol``
(ConsumerGroupHeartbeat, the broker assigns). Both: ``protocol`` (states, events, the request a member emits),
``requests`` (bodies and answers) and ``consumer_group_metadata`` (for transactional offset commits)."""
