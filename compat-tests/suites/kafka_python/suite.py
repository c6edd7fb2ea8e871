"""kafka-python's own integration tests (producer, consumer, admin), from its PyPI sdist.

The sdist ships ``test/integration`` but not the harness files it imports
(``test/__init__.py``, ``test/service.py``, ``test/conftest.py``); small
versions of those are in ``harness/`` beside this file and are laid over the
unpacked sdist. The fixtures then run in their external-broker mode
(``KAFKA_URI``), against the broker compat-tests/run started, configured the
way upstream's own harness configures its Kafka.

SASL and SSL tests are left out: kpybroker's listeners are PLAINTEXT only.
"""

from __future__ import annotations

import shutil
import tarfile
from pathlib import Path
from typing import ClassVar

from compat.install import build_once, digest, kafka_version, pypi_sdist, python_env
from compat.paths import COMPAT_ROOT, compat_cache
from compat.suite import Command, PytestSuite, RunContext

KAFKA_PYTHON_VERSION = "3.0.12"
SDIST_SHA256 = "4ccda3616b9aa5c353d74a97f2770d6cd1b950890d77ab0e8890e09a48eeed65"
#: The broker version the suite is told it runs against, by target. It picks which
#: tests run and the api_version every client is built with, so it must be the
#: Kafka release whose API versions the broker has: kpybroker serves Kafka 4.1's
#: (ListOffsets v10, DescribeLogDirs v4, ...; told 4.4, the suite expects what
#: 4.2 and 4.3 added), the reference is the Apache Kafka the Java and
#: differential suites pin (compat-tests/java/pom.xml).
KAFKA_VERSIONS = {"kpybroker": "4.1.0", "kafka": kafka_version()}
TEST_FILES = (
    "test/integration/test_producer_integration.py",
    "test/integration/test_consumer_integration.py",
    "test/integration/test_admin_integration.py",
)
REQUIREMENTS = (
    f"kafka-python=={KAFKA_PYTHON_VERSION}",
    "pytest==9.0.2",
    "pytest-timeout==2.4.0",
    # The codecs its compression tests need.
    "lz4==4.4.5",
    "python-snappy==0.7.3",
    "cramjam==2.14.0",
    "zstandard==0.25.0",
)


class KafkaPythonSuite(PytestSuite):
    name = "kafka-python"
    title = "kafka-python integration suite"
    summary = "kafka-python's own producer, consumer and admin integration tests"
    what = (
        "kafka-python's own test/integration from its sdist: producer, consumer and admin "
        f"tests, KAFKA_VERSION={KAFKA_VERSIONS['kpybroker']} (the API level kpybroker serves), "
        "external-broker mode (SASL/SSL files left out)"
    )
    # What upstream's harness gives its Kafka (test/integration/fixtures.py and
    # its kafka.properties): the suite's tests assume these settings.
    broker_overrides: ClassVar[dict[str, object]] = {
        "advertised.listeners": "PLAINTEXT://{host}:{port}",
        "num.partitions": 4,
        "default.replication.factor": 1,
        "group.min.session.timeout.ms": 1000,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": True,
    }
    test_paths = TEST_FILES
    test_timeout = 120.0
    run_timeout = 900.0

    source: Path

    def install(self) -> dict[str, str]:
        self.python = str(python_env("kafka-python", REQUIREMENTS))
        archive = pypi_sdist("kafka-python", KAFKA_PYTHON_VERSION, SDIST_SHA256)
        harness = self.directory / "harness"
        key = digest(SDIST_SHA256, *(p.read_bytes() for p in sorted(harness.rglob("*.py"))))
        target = compat_cache() / "src" / f"kafka-python-{KAFKA_PYTHON_VERSION}-{key}"

        def unpack(tmp: Path) -> None:
            with tarfile.open(archive) as tar:
                tar.extractall(tmp, filter="data")
            [top] = list(tmp.iterdir())
            for item in top.iterdir():
                item.rename(tmp / item.name)
            top.rmdir()
            shutil.copytree(harness, tmp, dirs_exist_ok=True)

        self.source = build_once(target, unpack)
        return {"kafka-python": KAFKA_PYTHON_VERSION, "KAFKA_VERSION": KAFKA_VERSIONS["kpybroker"]}

    def rootdir(self) -> Path:
        return self.source

    def paths(self) -> list[str]:
        return [str(self.source / p) for p in self.test_paths]

    def pythonpath(self) -> list[Path]:
        # The sdist's own kafka/ and test/ come first through pytest's rootdir;
        # only the plugin's package is added (kpybroker is not in this venv).
        return [COMPAT_ROOT]

    def command(self, ctx: RunContext) -> Command:
        command = super().command(ctx)
        # Upstream logs at DEBUG into every captured test; INFO keeps failures readable.
        # Known failures would otherwise print pages of client logs each.
        command.args += ["-o", "log_level=INFO", "--show-capture=no"]
        kafka_root = ctx.work_dir / "kafka-root"  # must exist; never used in external mode
        kafka_root.mkdir(exist_ok=True)
        command.env.update(
            KAFKA_VERSION=KAFKA_VERSIONS[ctx.target],
            KAFKA_URI=f"tcp://{ctx.bootstrap}",
            KAFKA_ROOT=str(kafka_root),
        )
        return command
