"""What every console tool shares: the connection flags, errors and tables.

The tools are clients, built on confluent-kafka (librdkafka), never on the broker's
internals: they work against any Kafka-compatible broker, as Kafka's own tools do.
Their flags follow Kafka's tools (``--bootstrap-server``, ``--command-config``,
``--property``) so that a user of one knows the other.

Errors a user can cause (a missing topic, a bad flag, an unreachable broker) are
printed as one sentence on stderr with exit status 1, never as a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from typing import NoReturn, TextIO, TypeVar

from kpybroker.config import PropertiesFormatError, read_properties

try:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient
except ModuleNotFoundError:  # the tools' one dependency beyond the broker's
    sys.exit("Error: the kpybroker console tools need confluent-kafka: pip install confluent-kafka")

T = TypeVar("T")

#: Exit status of a tool that failed for a reason it reports.
FAILURE = 1
#: How long an admin call may take before the tool gives up.
DEFAULT_TIMEOUT_S = 15.0


class ToolError(Exception):
    """A failure to report to the user as one sentence (exit status 1)."""


def fail(message: str) -> NoReturn:
    raise ToolError(message)


def parser(doc: str, examples: str) -> argparse.ArgumentParser:
    """An argument parser with the connection flags every tool takes.

    ``doc`` is the tool module's docstring, "kpybroker-x: what it does ...": its name
    becomes the program name and the rest, with ``examples``, the --help text.
    """
    prog, _, description = doc.partition(": ")
    result = argparse.ArgumentParser(
        prog=prog,
        description=description[:1].upper() + description[1:].rstrip() + "\n\n" + examples,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    result.add_argument(
        "--bootstrap-server",
        required=True,
        metavar="HOST:PORT",
        help="the broker(s) to connect to, comma separated",
    )
    result.add_argument(
        "--command-config",
        metavar="FILE",
        help="a properties file of client settings (librdkafka names, e.g. security.protocol)",
    )
    return result


def client_config(args: argparse.Namespace, **extra: object) -> dict[str, object]:
    """librdkafka settings: the bootstrap servers, the --command-config file, then ``extra``."""
    # librdkafka's own log lines (a refused connection, every retry) would drown the one
    # sentence a tool prints when it gives up; the tools report failures themselves.
    config: dict[str, object] = {"bootstrap.servers": args.bootstrap_server, "log_level": 0}
    if args.command_config:
        try:
            config.update(read_properties(args.command_config))
        except (OSError, PropertiesFormatError) as exc:
            fail(f"Could not read the command config {args.command_config}: {exc}")
    config.update(extra)
    return config


def key_values(items: Iterable[str], what: str) -> dict[str, str]:
    """``["a=1", "b=x,y"]`` as a mapping; a malformed item is a ToolError naming it."""
    result: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            fail(f"The {what} '{item}' is not of the form name=value.")
        result[name.strip()] = value
    return result


def admin_client(args: argparse.Namespace) -> AdminClient:
    return AdminClient(client_config(args))


def result_of(future: Future[T], what: str, timeout: float = DEFAULT_TIMEOUT_S) -> T:
    """Wait for an admin future; its Kafka error becomes a sentence about ``what``."""
    try:
        return future.result(timeout=timeout)
    except KafkaException as exc:
        fail(f"{what} failed: {describe_error(exc)}")
    except TimeoutError:
        fail(f"{what} timed out after {timeout:.0f} s; is the broker reachable?")


def describe_error(exc: Exception) -> str:
    """The broker's message for a Kafka error, ending with a full stop."""
    error = exc.args[0] if exc.args else exc
    text = error.str() if hasattr(error, "str") else str(error)
    return text if text.endswith(".") else text + "."


def print_table(
    headers: Sequence[str], rows: Iterable[Sequence[object]], out: TextIO | None = None
) -> None:
    """Rows under headers, each column as wide as its widest cell, two spaces apart."""
    out = out or sys.stdout
    cells = [[str(c) for c in headers]] + [["-" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        out.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n")


def run(main: Callable[[Sequence[str] | None], int], argv: Sequence[str] | None = None) -> int:
    """Run a tool's main, turning its reported failures and ^C into an exit status."""
    try:
        return main(argv)
    except ToolError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return FAILURE
    except KafkaException as exc:
        print(f"Error: {describe_error(exc)}", file=sys.stderr)
        return FAILURE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # e.g. piped into head
        return 0
