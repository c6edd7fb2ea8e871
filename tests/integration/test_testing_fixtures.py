"""kpybroker.testing and its pytest plugin, as a project that tests against kpybroker uses them.

The examples of docs/testing.md run as a pytest session of their own (pytester),
with the plugin, against confluent-kafka, kafka-python and aiokafka; the context
managers are tested directly for what a test does not see: a clean stop, with no
task, thread or file left behind, in both modes.
"""

from __future__ import annotations

import importlib.metadata
import re
import socket
import threading
from pathlib import Path

import pytest

from kpybroker.testing import (
    MODES,
    KafkaBroker,
    KafkaCluster,
    Mode,
    StartError,
    ZooKeeperUnavailable,
    broker,
)
from kpybroker.testing.brokers import TEST_DEFAULTS
from kpybroker.testing.runners import InProcessRunner

pytest_plugins = ("pytester",)

DOCS = Path(__file__).resolve().parents[2] / "docs" / "testing.md"
PLUGIN = "kpybroker.testing.pytest_plugin"


def plugin_args() -> list[str]:
    """``-p`` for the plugin unless the installed package registers it already (pytest11):
    registering one module under two names is an error."""
    installed = importlib.metadata.entry_points(group="pytest11", name="kpybroker")
    return [] if installed else ["-p", PLUGIN]


def docs_examples() -> dict[str, str]:
    """The ```python blocks of docs/testing.md that hold tests, as test modules."""
    blocks = re.findall(r"```python\n(.*?)```", DOCS.read_text(), re.DOTALL)
    return {f"test_docs_{n}": block for n, block in enumerate(blocks) if "def test_" in block}


def test_the_documented_examples_pass_with_every_client(pytester: pytest.Pytester) -> None:
    examples = docs_examples()
    pytester.makepyfile(**examples)
    result = pytester.runpytest_subprocess(*plugin_args(), "-p", "no:cacheprovider")
    # confluent-kafka, kafka-python, aiokafka, a factory broker, a cluster, the context manager.
    result.assert_outcomes(passed=6)


def test_a_conftest_fixture_of_the_same_name_wins(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        import pytest

        @pytest.fixture
        def kafka_broker():
            return "the project's own"
        """
    )
    pytester.makepyfile(
        'def test_own(kafka_broker):\n    assert kafka_broker == "the project\'s own"\n'
    )
    pytester.runpytest_subprocess(*plugin_args()).assert_outcomes(passed=1)


def test_kafka_cluster_skips_with_the_reason_without_java(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no java on it
    pytester.makepyfile("def test_cluster(kafka_cluster):\n    pass\n")
    result = pytester.runpytest_subprocess(*plugin_args(), "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*kafka_cluster needs ZooKeeper: java not found on PATH*"])


def test_the_subprocess_mode_option_runs_python_m_kpybroker(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_mode(kafka_broker):
            assert kafka_broker.mode == "subprocess"
            kafka_broker.produce("auto", [b"v"])
            assert kafka_broker.wait_for_records("auto", 1)[0].value == b"v"
        """
    )
    result = pytester.runpytest_subprocess(*plugin_args(), "--kpybroker-mode=subprocess")
    result.assert_outcomes(passed=1)


def test_an_in_process_broker_stops_its_tasks_and_threads_and_removes_its_files() -> None:
    threads_before = set(threading.enumerate())
    runner = InProcessRunner("kpybroker-under-test")
    with KafkaBroker() as kafka:
        kafka.create_topic("three", partitions=3, config={"cleanup.policy": "compact"})
        kafka.produce("three", [b"a", b"b", b"c"], key=b"k")
        records = kafka.wait_for_records("three", 3)
        directory = kafka.directory
        assert (directory / "data" / "three-0").is_dir()
        settings = {**kafka.settings, "log.dirs": str(directory / "second")}
        runner.start(settings, timeout=30)
        runner.stop(timeout=30)
    assert [r.value for r in records] == [b"a", b"b", b"c"]
    assert len({r.partition for r in records}) == 1  # one key, one partition
    assert runner.leftover_tasks == []
    assert not directory.exists()
    assert set(threading.enumerate()) - threads_before == set()


def test_settings_override_the_test_defaults() -> None:
    with broker(
        {"group.initial.rebalance.delay.ms": 100, "auto.create.topics.enable": False}
    ) as kafka:
        assert kafka.settings["group.initial.rebalance.delay.ms"] == "100"
        assert kafka.settings["auto.create.topics.enable"] == "false"
        with pytest.raises(TimeoutError, match="'absent' did not appear"):
            kafka.wait_for_records("absent", 1, timeout=1)
    assert TEST_DEFAULTS["group.initial.rebalance.delay.ms"] == "0"


def test_a_subprocess_broker_keeps_a_given_directory(tmp_path: Path) -> None:
    with broker({"num.partitions": 2}, mode="subprocess", directory=tmp_path) as kafka:
        kafka.produce("auto", [b"x"], partition=1)
        [record] = kafka.wait_for_records("auto", 1)
    assert (record.partition, record.value) == (1, b"x")
    assert (tmp_path / "data" / "auto-1").is_dir()


@pytest.mark.parametrize("mode", MODES)
def test_a_broker_that_cannot_start_says_why(mode: Mode) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        listeners = f"PLAINTEXT://127.0.0.1:{taken.getsockname()[1]}"
        kafka = KafkaBroker({"listeners": listeners}, mode=mode)
        with pytest.raises(StartError, match=r"did not start|exited before it was ready"):
            kafka.start()
    assert not kafka.directory.exists()


def test_a_cluster_replicates_three_ways() -> None:
    kafka = KafkaCluster(3)
    try:
        kafka.start()
    except ZooKeeperUnavailable as exc:
        pytest.fail(f"{exc}: run scripts/install-test-deps", pytrace=False)
    try:
        kafka.create_topic("replicated", partitions=2, replication_factor=3)
        topic = kafka.admin().list_topics("replicated", timeout=10).topics["replicated"]
        assert all(sorted(p.isrs) == [0, 1, 2] for p in topic.partitions.values())
    finally:
        kafka.stop()
    assert not kafka.directory.exists()
