"""kpybroker-topics: create, list, describe, alter and delete topics (like kafka-topics.sh)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

from kpybroker.tools.common import (
    DEFAULT_TIMEOUT_S,
    admin_client,
    fail,
    key_values,
    parser,
    print_table,
    result_of,
    run,
)

EXAMPLES = """\
examples:
  kpybroker-topics --bootstrap-server localhost:9092 --create --topic orders --partitions 3
  kpybroker-topics --bootstrap-server localhost:9092 --create --topic events \\
      --config retention.ms=86400000 --config cleanup.policy=compact
  kpybroker-topics --bootstrap-server localhost:9092 --list
  kpybroker-topics --bootstrap-server localhost:9092 --describe --topic orders
  kpybroker-topics --bootstrap-server localhost:9092 --alter --topic orders --partitions 6
  kpybroker-topics --bootstrap-server localhost:9092 --delete --topic orders
"""


def build_parser() -> argparse.ArgumentParser:
    result = parser(__doc__, EXAMPLES)
    action = result.add_mutually_exclusive_group(required=True)
    for name, text in (
        ("create", "create a topic"),
        ("list", "list the topics' names"),
        ("describe", "show topics, their configs that differ from the defaults, and partitions"),
        ("alter", "raise a topic's partition count (partitions are never removed)"),
        ("delete", "delete a topic and its data"),
    ):
        action.add_argument(f"--{name}", action="store_true", help=text)
    result.add_argument("--topic", help="the topic (describe: every topic when left out)")
    result.add_argument("--partitions", type=int, help="partition count (create, alter)")
    result.add_argument(
        "--replication-factor", type=int, help="replicas per partition (create; broker default)"
    )
    result.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a topic config for --create (repeat it, or separate them with commas)",
    )
    result.add_argument("--if-not-exists", action="store_true", help="create: fine if it exists")
    result.add_argument("--if-exists", action="store_true", help="alter, delete: fine if absent")
    return result


def create(admin: AdminClient, args: argparse.Namespace) -> None:
    topic = NewTopic(
        args.topic,
        num_partitions=-1 if args.partitions is None else args.partitions,
        replication_factor=-1 if args.replication_factor is None else args.replication_factor,
        config=key_values(args.config, "config"),
    )
    if args.if_not_exists and args.topic in existing_topics(admin):
        return
    result_of(admin.create_topics([topic])[args.topic], f"Creating topic {args.topic}")
    print(f"Created topic {args.topic}.")


def existing_topics(admin: AdminClient) -> list[str]:
    metadata = admin.list_topics(timeout=DEFAULT_TIMEOUT_S)
    return sorted(metadata.topics)


def describe(admin: AdminClient, args: argparse.Namespace) -> None:
    names = [args.topic] if args.topic else existing_topics(admin)
    if args.topic and args.topic not in existing_topics(admin):
        fail(f"Topic '{args.topic}' does not exist.")
    if not names:
        return
    futures = admin.describe_topics(TopicCollection(names))
    descriptions = [result_of(futures[name], f"Describing topic {name}") for name in names]
    resources = [ConfigResource("TOPIC", name) for name in names]
    configs = admin.describe_configs(resources)
    summary, partitions = [], []
    for description, resource in zip(descriptions, resources, strict=True):
        entries = result_of(configs[resource], f"Describing the configs of {resource.name}")
        overrides = ",".join(
            f"{e.name}={e.value}"
            for e in sorted(entries.values(), key=lambda e: e.name)
            if not e.is_default
        )
        infos = description.partitions
        summary.append(
            (
                description.name,
                description.topic_id,
                len(infos),
                len(infos[0].replicas) if infos else 0,
                overrides or "-",
            )
        )
        for info in infos:
            partitions.append(
                (
                    description.name,
                    info.id,
                    info.leader.id if info.leader else "none",
                    ",".join(str(n.id) for n in info.replicas),
                    ",".join(str(n.id) for n in info.isr),
                )
            )
    print_table(("TOPIC", "TOPIC-ID", "PARTITIONS", "REPLICATION-FACTOR", "CONFIGS"), summary)
    print()
    print_table(("TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR"), partitions)


def alter(admin: AdminClient, args: argparse.Namespace) -> None:
    if args.partitions is None:
        fail("--alter needs --partitions, the new partition count.")
    if args.if_exists and args.topic not in existing_topics(admin):
        return
    future = admin.create_partitions([NewPartitions(args.topic, args.partitions)])[args.topic]
    result_of(future, f"Adding partitions to {args.topic}")
    print(f"Topic {args.topic} now has {args.partitions} partitions.")


def delete(admin: AdminClient, args: argparse.Namespace) -> None:
    if args.if_exists and args.topic not in existing_topics(admin):
        return
    result_of(admin.delete_topics([args.topic])[args.topic], f"Deleting topic {args.topic}")
    print(f"Deleted topic {args.topic}.")


def main(argv: Sequence[str] | None = None) -> int:
    return run(_main, argv)


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    if (args.create or args.alter or args.delete) and not args.topic:
        fail("--topic is required with --create, --alter and --delete.")
    admin = admin_client(args)
    if args.list:
        print("\n".join(existing_topics(admin)))
    elif args.create:
        create(admin, args)
    elif args.describe:
        describe(admin, args)
    elif args.alter:
        alter(admin, args)
    else:
        delete(admin, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
