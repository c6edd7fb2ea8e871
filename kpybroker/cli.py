"""The ``kpybroker`` command: load the configuration, run the broker, stop on a signal.

    kpybroker [server.properties] [--override key=value ...]

With no file the embedded defaults apply: one broker on 127.0.0.1:9092 with
its data in ./kpybroker-data.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from kpybroker import __version__
from kpybroker.broker import Broker
from kpybroker.config import BrokerConfig, ConfigError, Listener
from kpybroker.log.open_files import raise_open_files_limit
from kpybroker.server.listener import BindError

log = logging.getLogger("kpybroker")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="kpybroker",
        description="A Kafka-wire-compatible broker. Takes Kafka's server.properties keys.",
    )
    parser.add_argument("config", nargs="?", type=Path, help="a server.properties file")
    parser.add_argument(
        "-c",
        "--config-file",
        type=Path,
        dest="config_file",
        help="a server.properties file (same as the positional argument)",
    )
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a config, overriding the file (repeatable)",
    )
    parser.add_argument(
        "--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"]
    )
    parser.add_argument("--version", action="version", version=f"kpybroker {__version__}")
    return parser.parse_args(argv)


def parse_overrides(items: list[str]) -> dict[str, str]:
    overrides = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(item, f"--override takes key=value, not {item!r}")
        overrides[key.strip()] = value.strip()
    return overrides


def event_loop_factory() -> tuple[str, Callable[[], asyncio.AbstractEventLoop]]:
    """uvloop's loop when it is installed: it halves the per-request overhead of asyncio."""
    try:
        import uvloop
    except ImportError:
        return "asyncio", asyncio.new_event_loop
    return "uvloop", uvloop.new_event_loop


async def serve(
    config: BrokerConfig,
    stop: asyncio.Event,
    on_ready: Callable[[list[Listener]], None] = lambda advertised: None,
) -> None:
    """Run a broker until ``stop`` is set, then stop it (also when it fails to start).

    ``on_ready`` gets its advertised listeners, with the ports bound for port 0, once
    it serves: that is how kpybroker.testing's in-process broker, which runs this on
    a thread of its own, learns its address.
    """
    broker = Broker(config)
    try:
        await broker.start()
        on_ready(broker.advertised)
        await stop.wait()
        log.info("shutting down")
    finally:
        await broker.stop()


async def run(config: BrokerConfig) -> None:
    """The command's broker: it runs until SIGTERM or SIGINT."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await serve(config, stop)
    log.info("shut down cleanly")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)-5s %(name)s: %(message)s",
    )
    try:
        config = BrokerConfig.load(args.config or args.config_file, parse_overrides(args.override))
    except (ConfigError, OSError) as exc:
        print(f"kpybroker: {exc}", file=sys.stderr)
        return 2
    loop_name, loop_factory = event_loop_factory()
    log.info("kpybroker %s on Python %s (%s)", __version__, sys.version.split()[0], loop_name)
    raise_open_files_limit()
    with contextlib.suppress(KeyboardInterrupt), asyncio.Runner(loop_factory=loop_factory) as loop:
        try:
            loop.run(run(config))
        except BindError as exc:
            # A fatal start-up error, not a bug: one line, no traceback (as Kafka logs it).
            log.error("Fatal error during broker startup, shutting down: %s", exc.strerror)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
