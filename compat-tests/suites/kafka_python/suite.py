"""kafka-python's own integration tests (producer, consumer, admin, SASL, SSL), from its sdist.

The sdist ships ``test/integration`` but not the harness files it imports
(``test/__init__.py``, ``test/service.py``, ``test/conftest.py``) nor the
templates its fixtures render (``servers/resources/default``); small
versions of those are in ``harness/`` beside this file and are laid over the
unpacked sdist. The broker is the secured one compat-tests/run starts,
configured the way upstream's own harness configures its Kafka.

The tests run in two pytest sessions. The producer, consumer and admin files
run in the fixtures' external-broker mode (``KAFKA_URI``) against its
PLAINTEXT listener. The SASL and SSL files have no external mode (the SASL
file skips itself when ``KAFKA_URI`` is set, the SSL file always starts a
broker): they run without it, and ``harness/test/service.py`` stands in for
the broker each fixture would start, serving it from the runner's listener
of the fixture's transport. ``KAFKA_ROOT`` then holds what the fixtures run
from a Kafka distribution: ``kafka-topics.sh`` is Kafka's own (the jars of
``compat-tests/java``), ``kafka-storage.sh`` formats nothing (the broker is
running, its SCRAM users added).
"""

from __future__ import annotations

import shlex
import shutil
import tarfile
from pathlib import Path
from typing import ClassVar

from compat.install import build_once, digest, kafka_jars, kafka_version, pypi_sdist, python_env
from compat.paths import COMPAT_ROOT, compat_cache
from compat.suite import Command, PytestSuite, RunContext
from tests.helpers.java import TOPIC_COMMAND, java_command

KAFKA_PYTHON_VERSION = "3.0.12"
SDIST_SHA256 = "4ccda3616b9aa5c353d74a97f2770d6cd1b950890d77ab0e8890e09a48eeed65"
#: The broker version the suite is told it runs against, by target. It picks which
#: tests run and the api_version every client is built with, so it must be the
#: Kafka release whose API versions the broker has: both serve Apache Kafka 4.4's
#: (the release the Java and differential suites pin, compat-tests/java/pom.xml).
KAFKA_VERSIONS = {"kpybroker": kafka_version(), "kafka": kafka_version()}
TEST_FILES = (
    "test/integration/test_producer_integration.py",
    "test/integration/test_consumer_integration.py",
    "test/integration/test_admin_integration.py",
)
#: The files whose fixtures start a broker of their own (no external mode).
SECURED_TEST_FILES = (
    "test/integration/test_sasl_integration.py",
    "test/integration/test_ssl_integration.py",
)
#: kafka-storage.sh for fixtures that would format a new broker's storage.
STORAGE_STAND_IN = """#!/bin/sh
# compat-tests: the broker is the runner's, already formatted and running, and the
# SCRAM user the fixture would add with --add-scram is one the runner added.
exit 0
"""
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
    summary = "kafka-python's own producer, consumer, admin, SASL and SSL integration tests"
    what = (
        "kafka-python's own test/integration from its sdist: producer, consumer and admin "
        f"tests, KAFKA_VERSION={KAFKA_VERSIONS['kpybroker']} (the API level kpybroker serves), "
        "external-broker mode; its SASL tests (admin, produce and consume, a raw client with "
        "PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 over SASL_PLAINTEXT, topics listed by Kafka's "
        "kafka-topics.sh) and SSL tests (a TLS handshake, a client checking the broker against "
        "the CA), served by the secured broker's listeners"
    )
    # What upstream's harness gives its Kafka (test/integration/fixtures.py and
    # its kafka.properties): the suite's tests assume these settings. Its SSL
    # broker asks for no client certificate.
    broker_overrides: ClassVar[dict[str, object]] = {
        "advertised.listeners": "{listeners}",
        "num.partitions": 4,
        "default.replication.factor": 1,
        "group.min.session.timeout.ms": 1000,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": True,
        "listener.name.ssl.ssl.client.auth": "none",
    }
    secured = True
    test_timeout = 120.0
    run_timeout = 900.0

    source: Path
    kafka_lib: Path

    def install(self) -> dict[str, str]:
        self.python = str(python_env("kafka-python", REQUIREMENTS))
        self.kafka_lib = kafka_jars()
        archive = pypi_sdist("kafka-python", KAFKA_PYTHON_VERSION, SDIST_SHA256)
        harness = self.directory / "harness"
        files = sorted(p for p in harness.rglob("*") if p.is_file() and p.suffix != ".pyc")
        parts = [part for p in files for part in (str(p.relative_to(harness)), p.read_bytes())]
        key = digest(SDIST_SHA256, *parts)
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

    def pythonpath(self) -> list[Path]:
        # The sdist's own kafka/ and test/ come first through pytest's rootdir;
        # only the plugin's package is added (kpybroker is not in this venv).
        return [COMPAT_ROOT]

    def commands(self, ctx: RunContext) -> list[Command]:
        """The external-mode files, then the SASL and SSL files (without ``KAFKA_URI``)."""
        kafka_root = self.kafka_root(ctx.work_dir / "kafka-root")
        external = self.session(ctx, TEST_FILES, ctx.junit_path, kafka_root)
        external.env["KAFKA_URI"] = f"tcp://{ctx.bootstrap}"
        junit = ctx.junit_path.with_name("junit-secured.xml")
        return [external, self.session(ctx, SECURED_TEST_FILES, junit, kafka_root)]

    def session(
        self, ctx: RunContext, files: tuple[str, ...], junit: Path, kafka_root: Path
    ) -> Command:
        command = self.pytest_command(ctx, [str(self.source / f) for f in files], junit)
        # Upstream logs at DEBUG into every captured test; INFO keeps failures readable.
        # Known failures would otherwise print pages of client logs each.
        command.args += ["-o", "log_level=INFO", "--show-capture=no"]
        command.env.update(KAFKA_VERSION=KAFKA_VERSIONS[ctx.target], KAFKA_ROOT=str(kafka_root))
        return command

    def kafka_root(self, root: Path) -> Path:
        """The Kafka distribution the fixtures run tools from (``KAFKA_ROOT/bin``)."""
        bin_dir = root / "bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        topics = shlex.join(java_command(self.kafka_lib, TOPIC_COMMAND))
        scripts = {
            "kafka-topics.sh": f'#!/bin/sh\nexec {topics} "$@"\n',
            "kafka-storage.sh": STORAGE_STAND_IN,
        }
        for name, text in scripts.items():
            (bin_dir / name).write_text(text)
            (bin_dir / name).chmod(0o755)
        return root
