"""Cluster metadata: a ZooKeeper-shaped store (``store``), its embedded backend
(``builtin``) and its ZooKeeper backend (``zookeeper``), and the broker's view laid
out as Kafka's ZooKeeper mode did: the values (``model``), the znode layout
(``znodes``), the cache machinery (``watches``), the view and its writes
(``cluster_metadata``), and Kafka's topic name rules (``topic_names``)."""
