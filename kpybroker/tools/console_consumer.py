"""kpybroker-console-consumer: print a topic's records (like kafka-console-consumer.sh).

Without --group the tool reads every partition (or the one given with --partition)
directly, committing nothing; with --group it joins that consumer group and commits
its progress. Each record is one line; ``--property print.key=true`` and friends add
the timestamp, partition, offset, headers and key before the value, in Kafka's
format and order, separated by ``key.separator`` (a tab).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    TIMESTAMP_LOG_APPEND_TIME,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    Message,
    TopicPartition,
)

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
  kpybroker-console-consumer --bootstrap-server localhost:9092 --topic orders --from-beginning
  kpybroker-console-consumer --bootstrap-server localhost:9092 --topic orders --partition 0 \\
      --offset 42 --max-messages 10 --property print.offset=true --property print.key=true
  kpybroker-console-consumer --bootstrap-server localhost:9092 --topic orders --group audit
  kpybroker-console-consumer --bootstrap-server localhost:9092 --topic load --from-beginning \\
      --progress > /dev/null
"""

POLL_S = 0.2


@dataclass(frozen=True, slots=True)
class RecordFormat:
    """Kafka's DefaultMessageFormatter properties."""

    print_timestamp: bool = False
    print_partition: bool = False
    print_offset: bool = False
    print_headers: bool = False
    print_key: bool = False
    print_value: bool = True
    key_separator: str = "\t"
    line_separator: str = "\n"
    headers_separator: str = ","
    headers_key_separator: str = ":"
    null_literal: str = "null"

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> RecordFormat:
        values: dict[str, object] = {}
        for name, value in props.items():
            field = name.replace(".", "_")
            if field not in cls.__dataclass_fields__:
                known = ", ".join(f.replace("_", ".") for f in cls.__dataclass_fields__)
                fail(f"Unknown --property {name}; known: {known}.")
            values[field] = value.lower() == "true" if field.startswith("print_") else value
        return cls(**values)  # type: ignore[arg-type]

    def line(self, message: Message) -> str:
        fields = []
        if self.print_timestamp:
            kind, timestamp = message.timestamp()
            if kind == TIMESTAMP_NOT_AVAILABLE:
                fields.append("NO_TIMESTAMP")
            else:
                name = "LogAppendTime" if kind == TIMESTAMP_LOG_APPEND_TIME else "CreateTime"
                fields.append(f"{name}:{timestamp}")
        if self.print_partition:
            fields.append(f"Partition:{message.partition()}")
        if self.print_offset:
            fields.append(f"Offset:{message.offset()}")
        if self.print_headers:
            headers = message.headers() or []
            fields.append(
                self.headers_separator.join(
                    f"{k}{self.headers_key_separator}{self._text(v)}" for k, v in headers
                )
                or "NO_HEADERS"
            )
        if self.print_key:
            fields.append(self._text(message.key()))
        if self.print_value:
            fields.append(self._text(message.value()))
        return self.key_separator.join(fields) + self.line_separator

    def _text(self, data: bytes | None) -> str:
        return self.null_literal if data is None else data.decode("utf-8", "replace")


def build_parser() -> argparse.ArgumentParser:
    result = parser(__doc__, EXAMPLES)
    result.add_argument("--topic", required=True, help="the topic to read")
    result.add_argument("--group", help="consume as this consumer group, committing offsets")
    result.add_argument("--partition", type=int, help="read only this partition")
    result.add_argument(
        "--offset",
        default="latest",
        help="where to start without a group: earliest, latest (default) or an offset",
    )
    result.add_argument(
        "--from-beginning", action="store_true", help="start at the earliest offset"
    )
    result.add_argument("--max-messages", type=int, help="stop after this many records")
    result.add_argument("--timeout-ms", type=int, help="stop when no record arrives for this long")
    result.add_argument(
        "--property",
        "--formatter-property",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="output format: print.timestamp, print.partition, print.offset, print.headers, "
        "print.key, print.value, key.separator, line.separator, headers.separator, "
        "headers.key.separator, null.literal",
    )
    result.add_argument(
        "--progress",
        action="store_true",
        help="print throughput (records/s, MB/s, totals) to stderr every second, and a summary",
    )
    result.add_argument(
        "--consumer-property",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a librdkafka consumer setting",
    )
    return result


def start_offset(args: argparse.Namespace) -> int:
    if args.from_beginning or args.offset == "earliest":
        return OFFSET_BEGINNING
    if args.offset == "latest":
        return OFFSET_END
    if not args.offset.isdigit():
        fail(f"--offset must be earliest, latest or a non-negative number, not '{args.offset}'.")
    return int(args.offset)


def attach(consumer: Consumer, args: argparse.Namespace) -> None:
    """Subscribe as the group, or assign the partitions directly without one."""
    if args.group:
        consumer.subscribe([args.topic])
        return
    metadata = consumer.list_topics(args.topic, timeout=DEFAULT_TIMEOUT_S)
    topic = metadata.topics[args.topic]
    if topic.error is not None:
        fail(f"Cannot read topic {args.topic}: {describe_error(Exception(topic.error))}")
    partitions = sorted(topic.partitions)
    if args.partition is not None:
        if args.partition not in partitions:
            fail(f"Topic {args.topic} has no partition {args.partition}.")
        partitions = [args.partition]
    offset = start_offset(args)
    consumer.assign([TopicPartition(args.topic, p, offset) for p in partitions])


def consume(
    consumer: Consumer,
    args: argparse.Namespace,
    record_format: RecordFormat,
    progress: Progress,
) -> int:
    """Print records until --max-messages, --timeout-ms or ^C; return how many were printed."""
    out = sys.stdout
    idle_since = time.monotonic()
    progress.start()
    try:
        while args.max_messages is None or progress.records < args.max_messages:
            message = consumer.poll(POLL_S)
            if message is None:
                idle = time.monotonic() - idle_since
                if args.timeout_ms is not None and idle * 1000 >= args.timeout_ms:
                    break
                continue
            if message.error() is not None:
                if message.error().fatal() or not message.error().retriable():
                    fail(
                        f"Reading {args.topic} failed: {describe_error(Exception(message.error()))}"
                    )
                continue
            idle_since = time.monotonic()
            out.write(record_format.line(message))
            progress.add(len(message.key() or b"") + len(message.value() or b""))
    except KeyboardInterrupt:
        pass
    finally:
        out.flush()
        progress.done()
    return progress.records


def main(argv: Sequence[str] | None = None) -> int:
    return run(_main, argv)


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    record_format = RecordFormat.from_properties(key_values(args.property, "property"))
    if args.group and (args.partition is not None or args.offset != "latest"):
        fail("--partition and --offset read without a group; leave out --group to use them.")
    defaults = {
        "group.id": args.group or "kpybroker-console-consumer",
        "enable.auto.commit": bool(args.group),
        "auto.offset.reset": "earliest" if args.from_beginning else "latest",
    }
    overrides = key_values(args.consumer_property, "consumer property")
    config = client_config(args, **(defaults | overrides))
    consumer = Consumer(config)
    try:
        attach(consumer, args)
        count = consume(consumer, args, record_format, Progress("received", report=args.progress))
    finally:
        consumer.close()
    print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
