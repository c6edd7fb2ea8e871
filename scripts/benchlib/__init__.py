"""``scripts/bench``: kpybroker and Apache Kafka side by side (issue 7).

The modules, in the order a run uses them:

* ``plan``       — the workloads' sizes (full and ``--quick``) and the settings of both brokers;
* ``procstat``   — the machine, and a process's CPU time and RSS from ``/proc``;
* ``wire``       — a tiny blocking Kafka client (startup probe, idle connections, Metadata);
* ``brokers``    — both brokers as measured subprocesses (reusing ``tests/helpers``);
* ``javatools``  — Kafka's ProducerPerformance, ConsumerPerformance, EndToEndLatency and
  ShareConsumerPerformance (workload 11: four share consumers on one partition);
* ``librdkafka`` — the confluent-kafka produce-then-group-consume workload, verified;
* ``scale``      — idle connections, then many partitions (memory, Metadata, a hot partition);
* ``rebalance``  — a 50-member consumer group joining and losing a member, both protocols;
* ``startup``    — workload 14: start-up, cold and warm, empty and with 1,000 partitions;
* ``clusters``   — three-broker clusters: kpybroker on ZooKeeper, Kafka in KRaft mode;
* ``replicated`` — workload 15: RF 3 produce and end-to-end latency, a follower's catch-up;
* ``results``    — samples, medians over rounds, ratios and targets, failed steps;
* ``profiling``  — py-spy profiles of kpybroker for the targets it misses;
* ``report``     — the printed table, ``docs/performance.md`` and its chart;
* ``cli``        — the rounds, alternating the brokers.
"""
