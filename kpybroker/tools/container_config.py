"""kpybroker-container: the container image's entrypoint, which turns KAFKA_* environment
variables into a server.properties file and then becomes the broker.

    python -m kpybroker.tools.container_config [--properties-file FILE] [--print | --check]
                                               [kpybroker arguments ...]

The variables follow the convention of the common Kafka images (confluentinc/cp-kafka's
``env_to_props``, which apache/kafka's image uses too): after ``KAFKA_`` the name is
lower-cased, a lone ``_`` becomes ``.``, ``___`` becomes ``-`` and ``__`` becomes ``_``.
So ``KAFKA_ADVERTISED_LISTENERS`` sets ``advertised.listeners`` and
``KAFKA_LISTENER_NAME_SASL__SSL_SCRAM___SHA___256_SASL_JAAS_CONFIG`` sets
``listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config``.

As in apache/kafka's image, ``listeners`` defaults to the advertised listeners with each
host replaced by 0.0.0.0; with neither set the broker listens on port 9092 of every
interface and advertises the container's host name (Kafka's meaning of an empty host).
The variables those images hand to the JVM (``KAFKA_HEAP_OPTS``, ``KAFKA_OPTS``, ...)
name no config and are ignored, except ``KAFKA_LOG4J_ROOT_LOGLEVEL``, which sets the
broker's log level. Every other KAFKA_* variable must name a broker config kpybroker
knows, and its value must pass the broker's own checks: a misspelt name or a bad value
stops the container at once with a message naming the variable, where a broker that
ignored it would run with a setting nobody chose.

The file is written with mode 0600 (it may hold passwords); then this process execs
``python -m kpybroker FILE``, so that the broker is the container's main process and
receives its SIGTERM.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from kpybroker.config import (
    BrokerConfig,
    ConfigError,
    PropertiesFormatError,
    format_properties,
    read_properties,
)

PREFIX = "KAFKA_"
DEFAULT_PROPERTIES_FILE = Path("/etc/kpybroker/server.properties")
#: Where the broker listens when neither listeners nor advertised.listeners is given.
DEFAULT_LISTENERS = "PLAINTEXT://:9092"
#: Set for the JVM by the Kafka images, never a broker config (their ``excludes`` lists).
JVM_VARIABLES = frozenset(
    {
        "KAFKA_VERSION",
        "KAFKA_HEAP_OPTS",
        "KAFKA_OPTS",
        "KAFKA_JMX_OPTS",
        "KAFKA_JMX_PORT",
        "KAFKA_JMX_HOSTNAME",
        "KAFKA_JVM_PERFORMANCE_OPTS",
        "KAFKA_GC_LOG_OPTS",
        "KAFKA_LOG4J_OPTS",
        "KAFKA_LOG4J_LOGGERS",
        "KAFKA_LOG4J_ROOT_LOGLEVEL",
        "KAFKA_TOOLS_LOG4J_LOGLEVEL",
    }
)
LOG_LEVEL_VARIABLE = "KAFKA_LOG4J_ROOT_LOGLEVEL"
#: log4j's level names, as kpybroker's --log-level spells them.
LOG4J_LEVELS = {
    "TRACE": "DEBUG",
    "DEBUG": "DEBUG",
    "INFO": "INFO",
    "WARN": "WARNING",
    "ERROR": "ERROR",
    "FATAL": "ERROR",
}

_LONE_UNDERSCORE = re.compile(r"(?<=[^_])_(?=[^_])")
_LISTENER_HOST = re.compile(r"://[^:]*:")


class ContainerConfigError(Exception):
    """The environment cannot configure the broker; the message names the variable."""


def config_name(variable: str) -> str:
    """The config a KAFKA_* variable sets: ``KAFKA_LOG_RETENTION_HOURS`` -> log.retention.hours."""
    name = _LONE_UNDERSCORE.sub(".", variable.removeprefix(PREFIX).lower())
    return name.replace("___", "-").replace("__", "_")


def properties_from_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The server.properties the KAFKA_* variables of ``environ`` describe, checked."""
    variables = {
        name: value
        for name, value in sorted(environ.items())
        if name.startswith(PREFIX) and name not in JVM_VARIABLES
    }
    props = {config_name(name): value for name, value in variables.items()}
    if "listeners" not in props:
        advertised = props.get("advertised.listeners")
        props["listeners"] = (
            _LISTENER_HOST.sub("://0.0.0.0:", advertised) if advertised else DEFAULT_LISTENERS
        )
    variable_of = {config_name(name): name for name in variables}
    try:
        config = BrokerConfig(props)
    except ConfigError as exc:
        raise ContainerConfigError(f"{_origin(exc.key, variable_of)}: {exc}") from None
    if config.unknown_keys:
        key = config.unknown_keys[0]
        raise ContainerConfigError(
            f"{variable_of[key]} sets {key}, which is not a broker config kpybroker knows "
            "(docs/configs.md lists them). Unset it if it is not meant for the broker."
        )
    return props


def _origin(key: str, variable_of: Mapping[str, str]) -> str:
    """The variable to blame for a config error about ``key``."""
    if key in variable_of:
        return variable_of[key]
    if key == "listeners":
        return "listeners (derived from KAFKA_ADVERTISED_LISTENERS)"
    return f"{variable_name(key)} (unset)"  # a rule between configs, one left at its default


def variable_name(config: str) -> str:
    """The KAFKA_* variable that sets ``config``: the inverse of ``config_name``."""
    return PREFIX + config.replace("_", "__").replace("-", "___").replace(".", "_").upper()


def log_level(environ: Mapping[str, str]) -> str | None:
    """kpybroker's --log-level for KAFKA_LOG4J_ROOT_LOGLEVEL, None when it is unset."""
    value = environ.get(LOG_LEVEL_VARIABLE)
    if value is None:
        return None
    if value.upper() not in LOG4J_LEVELS:
        raise ContainerConfigError(
            f"{LOG_LEVEL_VARIABLE}={value} is not a log level: use one of {', '.join(LOG4J_LEVELS)}"
        )
    return LOG4J_LEVELS[value.upper()]


def write_properties(path: Path, props: Mapping[str, str]) -> None:
    """Write the file readable by its owner only: it may hold passwords."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write("# Written by kpybroker-container from the KAFKA_* environment variables.\n")
        out.write(format_properties(props))


def broker_command(path: Path, level: str | None, broker_args: Sequence[str]) -> list[str]:
    """The argv that runs the broker on ``path`` with the same interpreter."""
    level_args = ["--log-level", level] if level else []
    return [sys.executable, "-m", "kpybroker", str(path), *level_args, *broker_args]


def is_listening(path: Path, timeout_s: float = 5.0) -> bool:
    """The health check: the broker's first listener accepts a connection."""
    try:
        listener = BrokerConfig(read_properties(path)).listeners()[0]
    except (OSError, PropertiesFormatError, ConfigError, IndexError):
        return False
    host = "127.0.0.1" if listener.host in ("", "0.0.0.0") else listener.host
    try:
        socket.create_connection((host, listener.port), timeout_s).close()
    except OSError:
        return False
    return True


def build_parser() -> argparse.ArgumentParser:
    prog, _, description = __doc__.partition(": ")
    summary = description.split("\n\n")[0].replace("\n", " ")
    result = argparse.ArgumentParser(prog=prog, description=summary[:1].upper() + summary[1:])
    result.add_argument(
        "--properties-file",
        type=Path,
        default=DEFAULT_PROPERTIES_FILE,
        help=f"where to write server.properties (default {DEFAULT_PROPERTIES_FILE})",
    )
    mode = result.add_mutually_exclusive_group()
    mode.add_argument(
        "--print", action="store_true", help="print the properties instead of starting the broker"
    )
    mode.add_argument(
        "--check",
        action="store_true",
        help="health check: exit 0 if the broker of the written file accepts connections",
    )
    result.add_argument("broker_args", nargs=argparse.REMAINDER, help="passed on to kpybroker")
    return result


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.check:
        return 0 if is_listening(args.properties_file) else 1
    environ = os.environ if environ is None else environ
    try:
        props = properties_from_environment(environ)
        level = log_level(environ)
    except ContainerConfigError as exc:
        print(f"kpybroker-container: {exc}", file=sys.stderr)
        return 2
    if args.print:
        sys.stdout.write(format_properties(props))
        return 0
    write_properties(args.properties_file, props)
    command = broker_command(args.properties_file, level, args.broker_args)
    os.execv(command[0], command)


if __name__ == "__main__":
    sys.exit(main())
