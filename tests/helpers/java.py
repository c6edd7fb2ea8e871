"""Apache Kafka's jars (from ``compat-tests/java/fetch-jars``) and running its Java tools."""

from __future__ import annotations

import functools
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from tests.helpers.process import REPO_ROOT, ToolResult, run_tool

FETCH_JARS = REPO_ROOT / "compat-tests" / "java" / "fetch-jars"
LOG4J2_CONFIG = REPO_ROOT / "compat-tests" / "java" / "log4j2.properties"

# Kafka's tools' main classes (Kafka 4.x).
CONSOLE_PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
GET_OFFSET_SHELL = "org.apache.kafka.tools.GetOffsetShell"
KAFKA_SERVER = "kafka.Kafka"
STORAGE_TOOL = "kafka.tools.StorageTool"


#: JVM options for short-lived tools: start fast, stay small.
TOOL_JVM_OPTIONS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


class MissingDependency(RuntimeError):
    """A test dependency is not installed (run scripts/install-test-deps)."""


def java_executable() -> str:
    """Path of ``java``; MissingDependency when there is none."""
    java = shutil.which("java")
    if java is None:
        raise MissingDependency(
            "java not found on PATH: run scripts/install-test-deps (needs OpenJDK 17)"
        )
    return java


@functools.cache
def fetch_kafka_lib() -> Path:
    """Run fetch-jars (a no-op once the jars are cached) and return the lib directory."""
    java_executable()
    try:
        proc = subprocess.run(
            [str(FETCH_JARS)], capture_output=True, text=True, timeout=900, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise MissingDependency(f"{FETCH_JARS} could not run: {exc}") from exc
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise MissingDependency(
            f"{FETCH_JARS} failed (status {proc.returncode}); run scripts/install-test-deps\n"
            f"--- stdout ---\n{proc.stdout}\n--- stderr ---\n{proc.stderr[-6000:]}"
        )
    lib = Path(lines[-1])
    if not any(lib.glob("kafka-clients-*.jar")):
        raise MissingDependency(f"{lib} holds no kafka-clients jar")
    return lib


def java_command(
    lib: Path,
    main_class: str,
    args: Sequence[str] = (),
    *,
    heap: str = "256m",
    log_level: str = "WARN",
    jvm_options: Sequence[str] = TOOL_JVM_OPTIONS,
    classes: Sequence[Path] = (),
) -> list[str]:
    """``java -cp '<lib>/*' <main_class> args...`` with a small heap and stderr logging;
    ``classes`` are further classpath entries (a test's own compiled classes)."""
    return [
        java_executable(),
        f"-Xmx{heap}",
        "-Djava.awt.headless=true",
        "-Dfile.encoding=UTF-8",
        f"-Dlog4j2.configurationFile={LOG4J2_CONFIG}",
        f"-Dkpybroker.log.level={log_level}",
        *jvm_options,
        "-cp",
        ":".join([f"{lib}/*", *map(str, classes)]),
        main_class,
        *args,
    ]


def run_java(
    lib: Path,
    main_class: str,
    args: Sequence[str] = (),
    *,
    input: str | bytes | None = None,
    timeout: float = 120.0,
    heap: str = "256m",
    log_level: str = "WARN",
) -> ToolResult:
    """Run one of Kafka's Java tools to completion (killed after ``timeout`` s)."""
    return run_tool(
        java_command(lib, main_class, args, heap=heap, log_level=log_level),
        input=input,
        timeout=timeout,
    )
