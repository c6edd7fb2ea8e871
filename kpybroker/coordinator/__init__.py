"""The group coordinator: Kafka's classic, consumer (KIP-848) and share (KIP-932) group
protocols and committed offsets.

Layers, from the wire inwards:

- ``service`` is what the API handlers call: Kafka's request-level checks, the
  routing of each group to its ``__consumer_offsets`` partition, and the
  mapping of coordinator errors; ``share_group_service`` its share group half,
  which also talks to the share coordinator through the persister.
- ``runtime`` is the only part that does I/O: it owns one shard per led
  partition of ``__consumer_offsets``, loads it from the log, appends its
  records, arms its timers on the event loop, completes waiting requests, and
  replays the transaction end markers written to its partitions.
- ``shard`` is the state machine of one partition, without I/O: events in
  (requests, fired timers, written and finished appends, replayed records and
  markers), ``Effects`` out (replies, records to append, timers to arm; see
  ``interface``). ``membership`` holds the classic rebalance protocol (over
  ``group``, the classic group and member model); ``consumer_group_protocol``
  KIP-848's ConsumerGroupHeartbeat (over ``consumer_group``, its model, and
  ``consumer_group_records``, its records), with ``assignors`` (uniform,
  range), ``reconciliation`` (revocation before reassignment) and
  ``topic_regex`` (RE2 subscriptions); ``consumer_group_migration`` the
  classic protocol inside consumer groups and the conversions between the two
  kinds; ``share_group_protocol`` KIP-932's ShareGroupHeartbeat (over
  ``share_group``, ``share_group_records`` and the ``simple_assignor``), with
  ``share_group_state`` (which share partitions have their state with the share
  coordinator) and ``share_group_admin`` (the offset admin APIs' share-state
  events), reached through ``share_shard``; ``request_checks`` what the two
  modern protocols check alike; ``topics_image`` the cluster's topics as the
  assignors see them; ``committed_offsets`` the committed offsets (OffsetCommit, OffsetFetch,
  OffsetDelete, expiry), ``transactional_offsets`` TxnOffsetCommit and the
  end of its transactions, ``offset_store`` the offsets in memory (committed
  ones, and the pending ones of open transactions).
- ``offsets_topic_records`` is the key and value format of
  ``__consumer_offsets``, which is Kafka's, so that a log directory stays
  readable by either broker; ``loader`` reads a partition back, transactional
  batches and end markers included; ``partitioning`` maps a group to its
  partition as Kafka does; ``coordinator_settings`` holds the configs the
  coordinator reads.
"""
