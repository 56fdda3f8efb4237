"""A consumer's group, sans I/O. Classic groups: ``membership`` (FindCoordinator, JoinGroup, SyncGroup,
Heartbeat, LeaveGroup) under ``member`` (assignments and offsets), with ``rebalance`` (eager and
cooperative), ``assignors``, ``assignor_base`` and ``sticky_assignor``. KIP-848 groups:
``consumer_protocol_member``. Both: ``protocol`` (states, events, the request a member emits),
``requests`` (bodies and answers) and ``consumer_group_metadata`` (for transactional offset commits)."""
