"""Fixtures for the integration tests: real broker processes and real Kafka clients.

The ``broker`` fixtures start ``python -m kpybroker`` as a subprocess; with
``KPYBROKER_TEST_TARGET=kafka`` they start a real Apache Kafka instead (from the
jars of ``compat-tests/java/fetch-jars``), which is how the tests themselves
are validated. A missing dependency (kcat, java, the jars) fails the test: run
``scripts/install-test-deps``.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tests.helpers.brokers import BrokerFactory, ManagedBroker, launcher, selected_target
from tests.helpers.java import MissingDependency, fetch_kafka_lib, run_java
from tests.helpers.process import ToolResult, ToolRunner, run_tool
from tests.helpers.reference_kafka import ReferenceKafka


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "slow: long-running test (minutes); deselect with -m 'not slow'"
    )
    # kafka-python 3.0 loads its protocol schemas with deprecated importlib APIs.
    for message in ("read_text is deprecated", "open_text is deprecated"):
        config.addinivalue_line("filterwarnings", f"ignore:{message}:DeprecationWarning")


def pytest_report_header(config: pytest.Config) -> str:
    return f"integration target: {selected_target()} (KPYBROKER_TEST_TARGET)"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """Keep each phase's report on the item, so fixtures can tell a failed test."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


def _test_failed(request: pytest.FixtureRequest) -> bool:
    report = getattr(request.node, "report_call", None)
    return report is not None and report.failed


def _attach_logs(request: pytest.FixtureRequest, brokers: Sequence[ManagedBroker]) -> None:
    """On a failed test, print the tail of each broker's output (pytest shows it)."""
    if _test_failed(request):
        for broker in brokers:
            print(f"\n===== {broker!r} output (tail) =====\n{broker.log_text()[-15000:]}")


@pytest.fixture
def broker_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BrokerFactory]:
    """Start brokers: ``broker_factory({"message.max.bytes": 65536})`` -> started broker.

    Each gets a free 127.0.0.1 port and a fresh data directory; all are stopped
    (SIGTERM) after the test, which errors if one does not exit cleanly.
    """
    with launcher(tmp_path / "brokers") as brokers:
        try:
            yield brokers
        finally:
            _attach_logs(request, brokers.brokers)


@pytest.fixture
def broker(broker_factory: BrokerFactory) -> ManagedBroker:
    """One started broker with default settings, for this test only."""
    return broker_factory()


@pytest.fixture(scope="module")
def module_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ManagedBroker]:
    """One broker shared by the tests of a module (each test uses its own topics)."""
    with launcher(tmp_path_factory.mktemp("module-broker")) as brokers:
        yield brokers()


@pytest.fixture(autouse=True)
def _module_broker_logs(request: pytest.FixtureRequest) -> Iterator[None]:
    """Print the shared broker's output when a test that used it fails."""
    yield
    if "module_broker" in request.fixturenames and _test_failed(request):
        _attach_logs(request, [request.getfixturevalue("module_broker")])


@pytest.fixture(scope="session")
def kafka_lib() -> Path:
    """The directory of Apache Kafka's jars (fetched once per cache by fetch-jars)."""
    try:
        return fetch_kafka_lib()
    except MissingDependency as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def java_tool(kafka_lib: Path) -> ToolRunner:
    """Run a Kafka Java tool: ``java_tool(MAIN_CLASS, *args, input=..., timeout=...)``."""

    def run(
        main_class: str, *args: str, input: str | None = None, timeout: float = 120.0
    ) -> ToolResult:
        return run_java(kafka_lib, main_class, list(args), input=input, timeout=timeout)

    return run


@pytest.fixture(scope="session")
def kcat_path() -> str:
    """Path of kcat; fails (never skips) when it is not installed."""
    path = shutil.which("kcat") or shutil.which("kafkacat")
    if path is None:
        pytest.fail("kcat not found on PATH: run scripts/install-test-deps", pytrace=False)
    return path


@pytest.fixture(scope="session")
def kcat(kcat_path: str) -> ToolRunner:
    """Run kcat: ``kcat("-b", bootstrap, "-L", input=..., timeout=...)``."""

    def run(*args: str, input: str | bytes | None = None, timeout: float = 60.0) -> ToolResult:
        return run_tool([kcat_path, *args], input=input, timeout=timeout)

    return run


@pytest.fixture
def reference_kafka(tmp_path: Path, kafka_lib: Path) -> Iterator[ReferenceKafka]:
    """A real Apache Kafka broker (KRaft, single node) for differential checks."""
    kafka = ReferenceKafka(tmp_path / "reference-kafka", lib=kafka_lib)
    kafka.start()
    try:
        yield kafka
    finally:
        kafka.stop()
