"""kpybroker-configs: describe and change topic and broker configs (like kafka-configs.sh).

--describe lists the configs set dynamically on the entity (a topic's overrides, a
broker's dynamic configs); with --all it lists every config with its source.
--alter sets (--add-config) and removes (--delete-config) dynamic configs; they take
effect at once and, for brokers, are kept in the metadata store across restarts.
The cluster-wide broker default (kafka-configs.sh --entity-default) is not reachable
through librdkafka, on which this tool is built; use kafka-configs.sh for it.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence

from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
)

from kpybroker.tools.common import (
    DEFAULT_TIMEOUT_S,
    admin_client,
    fail,
    parser,
    print_table,
    result_of,
    run,
)

EXAMPLES = """\
examples:
  kpybroker-configs --bootstrap-server localhost:9092 --describe --entity-type topics \\
      --entity-name orders --all
  kpybroker-configs --bootstrap-server localhost:9092 --alter --entity-type topics \\
      --entity-name orders --add-config 'retention.ms=3600000,cleanup.policy=[compact,delete]'
  kpybroker-configs --bootstrap-server localhost:9092 --alter --entity-type brokers \\
      --entity-name 0 --delete-config log.retention.ms
"""

ENTITY_TYPES = {"topics": "TOPIC", "brokers": "BROKER"}
# Sources that mean "set on this entity", which --describe shows without --all.
DYNAMIC_SOURCES = {"DYNAMIC_TOPIC_CONFIG", "DYNAMIC_BROKER_CONFIG"}
# a=1,b=[x,y]: commas inside brackets belong to a list value, as in kafka-configs.sh.
_ADD_CONFIG_ITEM = re.compile(r"([^=,]+)=(\[[^\]]*\]|[^,]*)(?:,|$)")


def build_parser() -> argparse.ArgumentParser:
    result = parser(__doc__, EXAMPLES)
    action = result.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true", help="show configs")
    action.add_argument("--alter", action="store_true", help="change configs")
    result.add_argument("--entity-type", required=True, choices=sorted(ENTITY_TYPES))
    result.add_argument(
        "--entity-name", help="topic name or broker id (describe: all when left out)"
    )
    result.add_argument("--entity-default", action="store_true", help=argparse.SUPPRESS)
    result.add_argument(
        "--all", action="store_true", help="describe every config, not only set ones"
    )
    result.add_argument("--add-config", metavar="A=1,B=[X,Y]", help="configs to set")
    result.add_argument("--delete-config", metavar="A,B", help="configs to remove")
    return result


def parse_add_config(text: str) -> dict[str, str]:
    """kafka-configs.sh's --add-config syntax: comma separated, lists in brackets."""
    result, position = {}, 0
    while position < len(text):
        match = _ADD_CONFIG_ITEM.match(text, position)
        if match is None:
            fail(f"--add-config must be a comma separated list of name=value, not '{text}'.")
        name, value = match.group(1).strip(), match.group(2)
        result[name] = value[1:-1] if value.startswith("[") else value
        position = match.end()
    return result


def entity_names(admin: AdminClient, args: argparse.Namespace) -> list[str]:
    if args.entity_name is not None:
        return [args.entity_name]
    if args.entity_type == "topics":
        return sorted(admin.list_topics(timeout=DEFAULT_TIMEOUT_S).topics)
    cluster = result_of(admin.describe_cluster(), "Describing the cluster")
    return [str(node.id) for node in sorted(cluster.nodes, key=lambda n: n.id)]


def describe(admin: AdminClient, args: argparse.Namespace) -> None:
    kind = ENTITY_TYPES[args.entity_type]
    for name in entity_names(admin, args):
        resource = ConfigResource(kind, name)
        entries = result_of(admin.describe_configs([resource])[resource], f"Describing {name}")
        shown = [
            e
            for e in sorted(entries.values(), key=lambda e: e.name)
            if args.all or ConfigSource(e.source).name in DYNAMIC_SOURCES
        ]
        what = "All" if args.all else "Dynamic"
        print(f"{what} configs for {args.entity_type[:-1]} {name}:")
        print_table(
            ("NAME", "VALUE", "SOURCE", "SENSITIVE"),
            [
                (e.name, e.value, ConfigSource(e.source).name, str(e.is_sensitive).lower())
                for e in shown
            ],
        )


def alter(admin: AdminClient, args: argparse.Namespace) -> None:
    if args.entity_name is None:
        fail("--alter needs --entity-name, the topic or broker to change.")
    if not args.add_config and not args.delete_config:
        fail("--alter needs --add-config or --delete-config.")
    changes = [
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in parse_add_config(args.add_config or "").items()
    ]
    changes += [
        ConfigEntry(name.strip(), None, incremental_operation=AlterConfigOpType.DELETE)
        for name in (args.delete_config or "").split(",")
        if name.strip()
    ]
    resource = ConfigResource(
        ENTITY_TYPES[args.entity_type], args.entity_name, incremental_configs=changes
    )
    what = f"{args.entity_type[:-1]} {args.entity_name}"
    result_of(admin.incremental_alter_configs([resource])[resource], f"Updating {what}")
    print(f"Completed updating config for {what}.")


def main(argv: Sequence[str] | None = None) -> int:
    return run(_main, argv)


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    if args.entity_default:
        fail(
            "The cluster-wide broker default cannot be reached through librdkafka; "
            "use kafka-configs.sh --entity-default, or name a broker with --entity-name."
        )
    admin = admin_client(args)
    if args.describe:
        describe(admin, args)
    else:
        alter(admin, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
