"""kpybroker-consumer-groups: list, describe, reset and delete consumer groups (like
kafka-consumer-groups.sh).

--describe shows, per partition, the group's committed offset, the log end offset,
the lag between them and the member that owns the partition. --reset-offsets moves
an inactive group's committed offsets (to the earliest or latest offset, an offset,
a point in time, or by a shift); it only shows the plan unless --execute is given.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from datetime import datetime

from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

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
  kpybroker-consumer-groups --bootstrap-server localhost:9092 --list
  kpybroker-consumer-groups --bootstrap-server localhost:9092 --describe --group audit
  kpybroker-consumer-groups --bootstrap-server localhost:9092 --reset-offsets --group audit \\
      --topic orders --to-datetime 2024-05-01T00:00:00 --execute
  kpybroker-consumer-groups --bootstrap-server localhost:9092 --delete --group audit
"""

Partition = tuple[str, int]


def build_parser() -> argparse.ArgumentParser:
    result = parser(__doc__, EXAMPLES)
    action = result.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="list the groups' ids")
    action.add_argument("--describe", action="store_true", help="offsets and lag per partition")
    action.add_argument("--reset-offsets", action="store_true", help="move committed offsets")
    action.add_argument("--delete", action="store_true", help="delete an inactive group")
    result.add_argument("--group", help="the group (all actions but --list)")
    result.add_argument(
        "--topic",
        help="reset: the topic, optionally with partitions (orders:0,2); default all committed",
    )
    target = result.add_mutually_exclusive_group()
    target.add_argument("--to-earliest", action="store_true", help="reset to the earliest offset")
    target.add_argument("--to-latest", action="store_true", help="reset to the log end offset")
    target.add_argument("--to-offset", type=int, metavar="N", help="reset to offset N")
    target.add_argument(
        "--to-datetime",
        metavar="YYYY-MM-DDTHH:MM:SS[.sss][+HH:MM]",
        help="reset to the first record at or after this time (local time without a zone)",
    )
    target.add_argument("--shift-by", type=int, metavar="N", help="move by N (may be negative)")
    result.add_argument("--execute", action="store_true", help="reset: do it, not just show it")
    result.add_argument("--dry-run", action="store_true", help="reset: only show (the default)")
    return result


def list_groups(admin: AdminClient) -> None:
    listed = result_of(admin.list_consumer_groups(), "Listing consumer groups")
    for group in sorted(listed.valid, key=lambda g: g.group_id):
        print(group.group_id)


def committed_offsets(admin: AdminClient, group: str) -> dict[Partition, int]:
    request = [ConsumerGroupTopicPartitions(group)]
    found = result_of(admin.list_consumer_group_offsets(request)[group], f"Fetching {group}")
    return {(tp.topic, tp.partition): tp.offset for tp in found.topic_partitions}


def log_offsets(
    admin: AdminClient, spec: OffsetSpec, partitions: list[Partition]
) -> dict[Partition, int]:
    """Offsets of ``partitions`` for one spec (earliest, latest, a timestamp), by ListOffsets."""
    if not partitions:
        return {}
    futures = admin.list_offsets({TopicPartition(t, p): spec for t, p in partitions})
    return {
        (tp.topic, tp.partition): result_of(future, f"Looking up offsets of {tp.topic}").offset
        for tp, future in futures.items()
    }


def describe_group(admin: AdminClient, group: str):  # -> ConsumerGroupDescription
    return result_of(admin.describe_consumer_groups([group])[group], f"Describing group {group}")


def describe(admin: AdminClient, group: str) -> None:
    description = describe_group(admin, group)
    owners: dict[Partition, tuple[str, str, str]] = {}
    for member in description.members:
        for tp in member.assignment.topic_partitions:
            owners[tp.topic, tp.partition] = (member.member_id, member.host, member.client_id)
    committed = committed_offsets(admin, group)
    partitions = sorted(set(committed) | set(owners))
    ends = log_offsets(admin, OffsetSpec.latest(), partitions)
    rows = []
    for topic, index in partitions:
        offset = committed.get((topic, index), -1)
        end = ends[topic, index]
        consumer, host, client = owners.get((topic, index), ("-", "-", "-"))
        lag = end - offset if offset >= 0 else "-"
        rows.append(
            (group, topic, index, offset if offset >= 0 else "-", end, lag, consumer, host, client)
        )
    state = description.state.name if description.state else "UNKNOWN"
    print(f"Consumer group '{group}' is {state.lower()} with {len(description.members)} member(s).")
    print_table(
        (
            "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
            "CONSUMER-ID", "HOST", "CLIENT-ID",
        ),
        rows,
    )  # fmt: skip


def reset_partitions(
    admin: AdminClient, args: argparse.Namespace, committed: dict[Partition, int]
) -> list[Partition]:
    if args.topic is None:
        if not committed:
            fail(f"Group {args.group} has no committed offsets; name the partitions with --topic.")
        return sorted(committed)
    topic, _, listed = args.topic.partition(":")
    if listed:
        return [(topic, int(p)) for p in listed.split(",")]
    metadata = admin.list_topics(topic, timeout=DEFAULT_TIMEOUT_S).topics[topic]
    if metadata.error is not None:
        fail(f"Topic {topic} does not exist.")
    return [(topic, p) for p in sorted(metadata.partitions)]


def reset_targets(
    admin: AdminClient,
    args: argparse.Namespace,
    partitions: list[Partition],
    committed: dict[Partition, int],
) -> dict[Partition, int]:
    """The new offset of each partition, kept inside [earliest, latest] as Kafka's tool does."""
    earliest = log_offsets(admin, OffsetSpec.earliest(), partitions)
    latest = log_offsets(admin, OffsetSpec.latest(), partitions)
    if args.to_earliest:
        wanted = earliest
    elif args.to_latest:
        wanted = latest
    elif args.to_offset is not None:
        wanted = dict.fromkeys(partitions, args.to_offset)
    elif args.to_datetime is not None:
        try:
            moment = datetime.fromisoformat(args.to_datetime)
        except ValueError:
            fail(f"--to-datetime '{args.to_datetime}' is not like 2024-05-01T12:00:00.")
        stamp = int(moment.timestamp() * 1000)
        found = log_offsets(admin, OffsetSpec.for_timestamp(stamp), partitions)
        wanted = {tp: latest[tp] if offset < 0 else offset for tp, offset in found.items()}
    elif args.shift_by is not None:
        wanted = {tp: committed.get(tp, latest[tp]) + args.shift_by for tp in partitions}
    else:
        fail("--reset-offsets needs one of --to-earliest, --to-latest, --to-offset, "
             "--to-datetime or --shift-by.")  # fmt: skip
    return {tp: min(max(wanted[tp], earliest[tp]), latest[tp]) for tp in partitions}


def reset(admin: AdminClient, args: argparse.Namespace) -> None:
    description = describe_group(admin, args.group)
    if args.execute and description.state not in (
        ConsumerGroupState.EMPTY,
        ConsumerGroupState.DEAD,
        ConsumerGroupState.UNKNOWN,
    ):
        fail(
            f"Assignments can only be reset if the group '{args.group}' is inactive, but the "
            f"current state is {description.state.name.lower()}."
        )
    committed = committed_offsets(admin, args.group)
    partitions = reset_partitions(admin, args, committed)
    targets = reset_targets(admin, args, partitions, committed)
    if args.execute:
        request = ConsumerGroupTopicPartitions(
            args.group, [TopicPartition(t, p, offset) for (t, p), offset in targets.items()]
        )
        result_of(admin.alter_consumer_group_offsets([request])[args.group], "Resetting offsets")
    print_table(
        ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"),
        [(args.group, t, p, offset) for (t, p), offset in sorted(targets.items())],
    )
    if not args.execute:
        print("(dry run: nothing was changed; add --execute to reset the offsets)")


def delete(admin: AdminClient, group: str) -> None:
    result_of(admin.delete_consumer_groups([group])[group], f"Deleting group {group}")
    print(f"Deletion of requested consumer groups ('{group}') was successful.")


def main(argv: Sequence[str] | None = None) -> int:
    return run(_main, argv)


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    if not args.list and not args.group:
        fail("--group is required with --describe, --reset-offsets and --delete.")
    if args.execute and args.dry_run:
        fail("--execute and --dry-run contradict each other; give one.")
    admin = admin_client(args)
    if args.list:
        list_groups(admin)
    elif args.describe:
        describe(admin, args.group)
    elif args.reset_offsets:
        reset(admin, args)
    else:
        delete(admin, args.group)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
