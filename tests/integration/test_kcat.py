"""kcat (librdkafka's command-line client) against the broker: -L, -P, -C, -Q."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest

from tests.helpers.brokers import ManagedBroker
from tests.helpers.clients import ConfluentClient
from tests.helpers.process import ToolRunner

pytestmark = pytest.mark.timeout(120)

PARTITIONS = 3


def make_topic(broker: ManagedBroker, name: str, partitions: int = PARTITIONS) -> str:
    """Create ``name`` (admin API) and return it."""
    ConfluentClient().create_topic(broker.bootstrap, name, partitions)
    return name


def consume_json(
    kcat: ToolRunner, bootstrap: str, topic: str, partition: int
) -> list[dict[str, Any]]:
    """Every record of one partition, from the beginning, as kcat's -J objects."""
    result = kcat(
        "-b", bootstrap, "-C", "-t", topic, "-p", str(partition), "-o", "beginning", "-e", "-J"
    ).check()
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def query_offset(kcat: ToolRunner, bootstrap: str, topic: str, partition: int, ts: int) -> int:
    """``kcat -Q``: the offset for timestamp ``ts`` (-1: end, -2: beginning)."""
    result = kcat("-b", bootstrap, "-Q", "-t", f"{topic}:{partition}:{ts}").check()
    match = re.search(rf"^{re.escape(topic)} \[{partition}\] offset (-?\d+)", result.stdout, re.M)
    assert match, f"unexpected -Q output\n{result.describe()}"
    return int(match.group(1))


def test_metadata_list(module_broker: ManagedBroker, kcat: ToolRunner) -> None:
    """-L lists the broker at its address and a created topic with its partitions and leaders."""
    topic = make_topic(module_broker, "kcat-list")

    text = kcat("-b", module_broker.bootstrap, "-L").check().stdout
    assert re.search(r"^ 1 brokers:", text, re.M), text
    assert f'topic "{topic}" with {PARTITIONS} partitions:' in text, text

    meta = json.loads(kcat("-b", module_broker.bootstrap, "-L", "-J").check().stdout)
    brokers = {b["id"]: b["name"] for b in meta["brokers"]}
    assert list(brokers.values()) == [module_broker.bootstrap], meta["brokers"]
    assert meta["controllerid"] in brokers, meta
    [entry] = [t for t in meta["topics"] if t["topic"] == topic]
    assert "error" not in entry, entry
    assert sorted(p["partition"] for p in entry["partitions"]) == list(range(PARTITIONS))
    for partition in entry["partitions"]:
        assert partition["leader"] in brokers, partition
        assert [r["id"] for r in partition["replicas"]] == [partition["leader"]], partition
        assert [r["id"] for r in partition["isrs"]] == [partition["leader"]], partition


def test_produce_then_consume_exact(module_broker: ManagedBroker, kcat: ToolRunner) -> None:
    """-P with -K/-Z/-H writes keyed, null and headered records; -C -e reads exactly them."""
    topic = make_topic(module_broker, "kcat-exact")
    lines = ["k1:v1", "k2:", ":no key", "k4:a:b:c", "k5:größe ✓", "k6:" + "x" * 5000]
    kcat(
        *("-b", module_broker.bootstrap, "-t", topic),
        *["-P", "-p", "1", "-K", ":", "-Z", "-H", "h1=one", "-H", "h2="],
        input="\n".join(lines) + "\n",
    ).check()

    got = consume_json(kcat, module_broker.bootstrap, topic, 1)
    expected = [
        ("k1", "v1"), ("k2", None), (None, "no key"), ("k4", "a:b:c"),
        ("k5", "größe ✓"), ("k6", "x" * 5000),
    ]  # fmt: skip
    assert [(r["key"], r["payload"]) for r in got] == expected
    assert [r["offset"] for r in got] == list(range(len(expected)))
    assert all(r["headers"] == ["h1", "one", "h2", ""] for r in got), got
    assert all(r["tstype"] == "create" for r in got), got
    # The other partitions stayed empty.
    for partition in (0, 2):
        assert consume_json(kcat, module_broker.bootstrap, topic, partition) == []

    # A custom format, and consuming from an absolute offset with a count.
    result = kcat(
        "-b", module_broker.bootstrap, "-C", "-t", topic, "-p", "1", "-o", "2", "-c", "2",
        "-e", "-Z", "-f", "%k|%S|%o\n",
    ).check()  # fmt: skip
    assert result.stdout.splitlines() == ["NULL|6|2", "k4|5|3"]


def test_query_offsets_by_timestamp(module_broker: ManagedBroker, kcat: ToolRunner) -> None:
    """-Q answers ListOffsets by timestamp: the first offset whose timestamp is >= the one asked."""
    topic = make_topic(module_broker, "kcat-query", partitions=1)
    for burst in range(3):
        kcat(
            "-b", module_broker.bootstrap, "-P", "-t", topic, "-p", "0",
            input="".join(f"burst{burst}-{i}\n" for i in range(4)),
        ).check()  # fmt: skip
        time.sleep(0.05)  # distinct create timestamps for each burst

    records = consume_json(kcat, module_broker.bootstrap, topic, 0)
    assert len(records) == 12
    stamps = [r["ts"] for r in records]
    for ts in [*sorted(set(stamps)), stamps[0] - 1000, stamps[-1] - 1]:
        want = next(i for i, s in enumerate(stamps) if s >= ts)
        assert query_offset(kcat, module_broker.bootstrap, topic, 0, ts) == want, ts
    assert query_offset(kcat, module_broker.bootstrap, topic, 0, max(stamps) + 1) == -1
    assert query_offset(kcat, module_broker.bootstrap, topic, 0, -1) == 12  # end
    assert query_offset(kcat, module_broker.bootstrap, topic, 0, -2) == 0  # beginning
