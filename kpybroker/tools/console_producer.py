"""kpybroker-console-producer: send lines from stdin or a file as records (like
kafka-console-producer.sh).

Each line is one record's value. With ``--property parse.key=true`` the line is
``key<key.separator>value``; with ``--property parse.headers=true`` it starts with
``name:value,name:value<headers.delimiter>``. The separators are Kafka's defaults
(a tab, a tab, ``,`` and ``:``) unless set with ``--property``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TextIO

from confluent_kafka import KafkaError, Message, Producer

from kpybroker.tools.common import (
    DEFAULT_TIMEOUT_S,
    client_config,
    describe_error,
    fail,
    key_values,
    parser,
    run,
)
from kpybroker.tools.progress import Progress

EXAMPLES = """\
examples:
  echo hello | kpybroker-console-producer --bootstrap-server localhost:9092 --topic orders
  kpybroker-console-producer --bootstrap-server localhost:9092 --topic orders \\
      --property parse.key=true --property key.separator=: --input-file orders.txt
  seq 1000000 | kpybroker-console-producer --bootstrap-server localhost:9092 --topic load \\
      --progress
"""

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


@dataclass(frozen=True, slots=True)
class LineFormat:
    """How a line splits into headers, key and value (Kafka's LineMessageReader properties)."""

    parse_key: bool = False
    key_separator: str = "\t"
    parse_headers: bool = False
    headers_delimiter: str = "\t"
    headers_separator: str = ","
    headers_key_separator: str = ":"
    null_marker: str | None = None

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> LineFormat:
        unknown = set(props) - set(_PROPERTY_FIELDS)
        if unknown:
            fail(f"Unknown --property {sorted(unknown)[0]}; known: {', '.join(_PROPERTY_FIELDS)}.")
        values: dict[str, object] = {}
        for name, value in props.items():
            field = _PROPERTY_FIELDS[name]
            values[field] = value.lower() == "true" if field.startswith("parse_") else value
        return cls(**values)  # type: ignore[arg-type]

    def parse(self, line: str) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]:
        """(key, value, headers) of one line, without its line ending."""
        headers: list[tuple[str, bytes | None]] = []
        if self.parse_headers:
            text, found, line = line.partition(self.headers_delimiter)
            if not found:
                fail(f"No headers delimiter {self.headers_delimiter!r} in line: {text}")
            for item in filter(None, text.split(self.headers_separator)):
                name, _, value = item.partition(self.headers_key_separator)
                headers.append((name, self._bytes(value)))
        key = None
        if self.parse_key:
            key_text, found, line = line.partition(self.key_separator)
            if not found:
                fail(f"No key separator {self.key_separator!r} in line: {key_text}")
            key = self._bytes(key_text)
        return key, self._bytes(line), headers

    def _bytes(self, text: str) -> bytes | None:
        return None if text == self.null_marker else text.encode()


_PROPERTY_FIELDS = {
    "parse.key": "parse_key",
    "key.separator": "key_separator",
    "parse.headers": "parse_headers",
    "headers.delimiter": "headers_delimiter",
    "headers.separator": "headers_separator",
    "headers.key.separator": "headers_key_separator",
    "null.marker": "null_marker",
}


def build_parser() -> argparse.ArgumentParser:
    result = parser(__doc__, EXAMPLES)
    result.add_argument("--topic", required=True, help="the topic to write to")
    result.add_argument(
        "--input-file", metavar="FILE", help="read lines from FILE instead of stdin"
    )
    result.add_argument(
        "--property",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="line format: " + ", ".join(_PROPERTY_FIELDS),
    )
    result.add_argument("--compression-codec", choices=CODECS, default="none")
    result.add_argument(
        "--request-required-acks", default="all", help="acks: all (-1), 1 or 0 (default all)"
    )
    result.add_argument(
        "--progress",
        action="store_true",
        help="print throughput (records/s, MB/s, totals) to stderr every second, and a summary",
    )
    result.add_argument(
        "--producer-property",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a librdkafka producer setting",
    )
    return result


def produce_lines(
    producer: Producer,
    topic: str,
    lines: Iterable[str],
    line_format: LineFormat,
    progress: Progress,
) -> int:
    """Send every line; return how many were delivered. The first failure stops the run."""
    errors: list[KafkaError] = []

    def on_delivery(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            errors.append(error)
        else:
            progress.add(len(message.key() or b"") + len(message.value() or b""))

    progress.start()
    try:
        for line in lines:
            key, value, headers = line_format.parse(line.rstrip("\r\n"))
            while True:
                try:
                    producer.produce(topic, value, key, headers=headers, on_delivery=on_delivery)
                    break
                except BufferError:  # the local queue is full: let deliveries drain it
                    producer.poll(0.1)
            producer.poll(0)
            if errors:
                break
        producer.flush(DEFAULT_TIMEOUT_S)
    finally:
        progress.done()
    if errors:
        fail(f"Sending to {topic} failed: {describe_error(Exception(errors[0]))}")
    return progress.records


def open_input(path: str | None) -> TextIO:
    if path is None:
        return sys.stdin
    try:
        return open(path, encoding="utf-8")
    except OSError as exc:
        fail(f"Could not open {path}: {exc.strerror}.")


def main(argv: Sequence[str] | None = None) -> int:
    return run(_main, argv)


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    line_format = LineFormat.from_properties(key_values(args.property, "property"))
    defaults = {"compression.type": args.compression_codec, "acks": args.request_required_acks}
    overrides = key_values(args.producer_property, "producer property")
    config = client_config(args, **(defaults | overrides))
    producer = Producer(config)
    with open_input(args.input_file) as lines:
        produce_lines(
            producer, args.topic, lines, line_format, Progress("sent", report=args.progress)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
