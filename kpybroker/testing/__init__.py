"""Kafka brokers for tests, started in well under a second: ``pip install kpybroker``.

    from kpybroker.testing import broker

    with broker() as kafka:
        kafka.create_topic("events", partitions=3)
        ...  # any Kafka client, bootstrap.servers=kafka.bootstrap_servers
        records = kafka.wait_for_records("events", count=10)

:func:`broker` runs one broker on a free port in a temporary directory, in this
process (a thread with its own event loop) or as ``python -m kpybroker``;
:func:`cluster` runs several on a ZooKeeper. The pytest plugin
(``kpybroker.testing.pytest_plugin``, installed with the package) offers them as
the fixtures ``kafka_broker``, ``kafka_broker_factory`` and ``kafka_cluster``.
docs/testing.md has examples for confluent-kafka, kafka-python and aiokafka.

Importing this package is cheap: the broker's own modules and confluent-kafka load
when a broker starts or a helper runs.
"""

from kpybroker.testing.brokers import TEST_DEFAULTS, KafkaBroker, broker
from kpybroker.testing.clients import Record
from kpybroker.testing.clusters import KafkaCluster, cluster
from kpybroker.testing.processes import StartError
from kpybroker.testing.runners import MODES, Mode
from kpybroker.testing.zookeeper import ZooKeeperUnavailable

__all__ = [
    "MODES",
    "TEST_DEFAULTS",
    "KafkaBroker",
    "KafkaCluster",
    "Mode",
    "Record",
    "StartError",
    "ZooKeeperUnavailable",
    "broker",
    "cluster",
]
