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
from pathlib import Path

from kpybroker import __version__
from kpybroker.broker import Broker
from kpybroker.config import BrokerConfig, ConfigError

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


def install_event_loop() -> str:
    """Use uvloop when it is installed: it halves the per-request overhead of asyncio."""
    try:
        import uvloop
    except ImportError:
        return "asyncio"
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return "uvloop"


async def run(config: BrokerConfig) -> None:
    broker = Broker(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await broker.start()
    try:
        await stop.wait()
        log.info("shutting down")
    finally:
        await broker.stop()
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
    loop_name = install_event_loop()
    log.info("kpybroker %s on Python %s (%s)", __version__, sys.version.split()[0], loop_name)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run(config))
    return 0


if __name__ == "__main__":
    sys.exit(main())
