"""kpybroker's pytest plugin: Kafka brokers as fixtures, installed with the package.

pytest loads it through the ``pytest11`` entry point wherever kpybroker is
installed, so it stays cheap to import (kpybroker.testing loads the broker and
confluent-kafka only when a fixture starts a broker), adds options only under a
``kpybroker`` prefix, and its fixture names give way to a project's own: a
``kafka_broker`` fixture in a conftest.py overrides this one.

- ``kafka_broker``: one broker for the whole session (use a topic name per test);
- ``kafka_broker_factory``: ``kafka_broker_factory(overrides)`` starts a broker of
  the test's own, stopped when the test ends;
- ``kafka_cluster``: three brokers on a ZooKeeper for the session; skipped, with
  the reason, when java or ZooKeeper is not installed.

``--kpybroker-mode`` (or the ini option ``kpybroker_mode``) picks ``inprocess``
(default: a thread of the test process) or ``subprocess`` (``python -m kpybroker``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack

import pytest

from kpybroker.testing import MODES, KafkaBroker, KafkaCluster, Mode, ZooKeeperUnavailable

MODE_OPTION = "kpybroker_mode"
#: ``kafka_broker_factory(overrides=None, mode=None) -> started KafkaBroker``.
KafkaBrokerFactory = Callable[..., KafkaBroker]


def pytest_addoption(parser: pytest.Parser) -> None:
    help_text = "how kpybroker's fixtures run brokers: inprocess (default) or subprocess"
    parser.addini(MODE_OPTION, help_text, default="inprocess")
    parser.getgroup("kpybroker").addoption(
        "--kpybroker-mode", dest=MODE_OPTION, choices=MODES, help=help_text
    )


def configured_mode(config: pytest.Config) -> Mode:
    mode = config.getoption(MODE_OPTION) or config.getini(MODE_OPTION)
    if mode not in MODES:
        raise pytest.UsageError(f"{MODE_OPTION} = {mode!r}: expected one of {MODES}")
    return mode


@pytest.fixture(scope="session")
def kafka_broker(pytestconfig: pytest.Config) -> Iterator[KafkaBroker]:
    """One broker for the session: ``kafka_broker.bootstrap_servers``, ``.create_topic``,
    ``.produce``, ``.wait_for_records``, ``.admin()``. Tests share it: give each its topics."""
    with KafkaBroker(mode=configured_mode(pytestconfig)) as broker:
        yield broker


@pytest.fixture
def kafka_broker_factory(pytestconfig: pytest.Config) -> Iterator[KafkaBrokerFactory]:
    """Start brokers of this test's own: ``kafka_broker_factory({"num.partitions": 3})``.

    Each gets a free port and a temporary directory; all stop when the test ends.
    """
    with ExitStack() as brokers:  # each is stopped, also when another fails to

        def start(
            overrides: Mapping[str, object] | None = None, mode: Mode | None = None
        ) -> KafkaBroker:
            broker = KafkaBroker(overrides, mode=mode or configured_mode(pytestconfig))
            return brokers.enter_context(broker)

        yield start


@pytest.fixture(scope="session")
def kafka_cluster(pytestconfig: pytest.Config) -> Iterator[KafkaCluster]:
    """Three brokers on a ZooKeeper of their own, for the session; skipped when java or
    ZooKeeper (Debian's ``zookeeper`` package) is not installed."""
    cluster = KafkaCluster(3, mode=configured_mode(pytestconfig))
    try:
        cluster.start()
    except ZooKeeperUnavailable as exc:
        pytest.skip(f"kafka_cluster needs ZooKeeper: {exc}")
    try:
        yield cluster
    finally:
        cluster.stop()
