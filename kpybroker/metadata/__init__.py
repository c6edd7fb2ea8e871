"""Cluster metadata: a ZooKeeper-shaped store (``store``), its embedded backend
(``builtin``), and the broker's view laid out as Kafka's ZooKeeper mode did
(``cluster``)."""
