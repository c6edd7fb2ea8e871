"""The transaction coordinator: transactional producers, ``__transaction_state`` and markers.

Layers, from the wire inwards, as in the group coordinator:

- ``service`` is what the API handlers call: request-level checks, routing of
  each transactional id to its ``__transaction_state`` partition, routing
  errors as the APIs answer them.
- ``runtime`` is the only part doing I/O: one shard per led partition, loaded
  from the log; appends with acks=all; markers handed to ``marker_channel``;
  the periodic abort of timed-out transactions and expiry of idle ids.
- ``shard`` is the state machine of one partition, without I/O: events in,
  ``effects`` out; ``transaction_state`` holds one id's fields and its legal
  transitions (Kafka's ``TransactionMetadata``).
- ``transaction_log_records`` is the key and value format of
  ``__transaction_state``, Kafka's own; ``transaction_settings`` the configs read.
- ``marker_channel`` sends a transaction's markers to its partitions' leaders
  until each has one; ``marker_writer`` writes markers to the partitions this
  broker leads (for WriteTxnMarkers and for the local coordinator alike).

Transaction version 1 is implemented: producers add partitions with
AddPartitionsToTxn, and the epoch moves only at InitProducerId (and when the
coordinator fences a timed-out transaction).
"""
