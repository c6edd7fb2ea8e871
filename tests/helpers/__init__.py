"""Shared helpers for kpybroker's tests.

- :mod:`tests.helpers.process`: child processes, output draining, free ports.
- :mod:`tests.helpers.brokers`: the broker under test (``python -m kpybroker``)
  as a subprocess, and the choice between it and a real Kafka.
- :mod:`tests.helpers.reference_kafka`: a real single-node Apache Kafka (KRaft)
  started from the jars that ``compat-tests/java/fetch-jars`` downloads.
- :mod:`tests.helpers.java`: those jars and running Kafka's Java tools.
- :mod:`tests.helpers.kcat`: running kcat.
- :mod:`tests.helpers.records`: deterministic test records and their checks.
- :mod:`tests.helpers.wire`: raw-socket Kafka framing for hostile-input tests.
"""
