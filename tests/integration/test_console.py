"""The web console (``console.enable``) of a real broker, looked at in headless Chromium.

A topic and a consumer group are made with a real client (confluent-kafka), then the
pages are loaded in Debian's chromium over the DevTools protocol and read back: the
topic with its partition count and offsets, the group with its lag, and a throughput
chart that takes in records produced while it is open. Screenshots go to
``tests/artifacts/console/`` (ignored by git), printed at the end of the test.

Also here: a KIP-848 consumer group and a share group through the JSON API; the admin
actions, refused when ``console.admin.enable`` is off; and slow HTTP clients (headers
one byte at a time, idle connections), which must not hold up Kafka requests on the
same event loop.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kpybroker.protocol.messages.api_versions import ApiVersionsRequest
from kpybroker.protocol.messages.metadata import MetadataRequest
from kpybroker.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from tests.helpers.brokers import BrokerFactory, ManagedBroker, selected_target
from tests.helpers.chromium import Chromium, chromium_path
from tests.helpers.groups_wire import Wire, find_coordinator

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(selected_target() != "kpybroker", reason="the console is kpybroker's"),
]

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts" / "console"
TOPIC = "console-topic"
GROUP = "console-group"
PARTITIONS = 3
PER_PARTITION = 10
#: Offsets the group commits, and so its lag: 6 + 0 + 10.
COMMITTED = {0: 4, 1: 10, 2: 0}
LAG = 16
MORE = 20
GROUP_SETTINGS = {"group.id": GROUP, "enable.auto.commit": False}
MEMBER = "console-member"
CONSOLE = {"console.enable": "true", "console.listeners": "http://127.0.0.1:0"}
SERVING = re.compile(r"console\.listeners: serving HTTP on (http://\S+)")


def console_url(broker: ManagedBroker) -> str:
    match = SERVING.search(broker.log_text())
    assert match, "the broker did not log its console address"
    return match.group(1)


def produce(bootstrap: str, partition_counts: dict[int, int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition, count in partition_counts.items():
        for i in range(count):
            producer.produce(TOPIC, f"record-{i}".encode(), partition=partition)
    assert producer.flush(30) == 0


def make_topic_and_group(bootstrap: str) -> None:
    """The topic with its records, and the group with its committed offsets."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
    produce(bootstrap, dict.fromkeys(range(PARTITIONS), PER_PARTITION))
    committer = Consumer(GROUP_SETTINGS | {"bootstrap.servers": bootstrap})
    offsets = [TopicPartition(TOPIC, p, o) for p, o in COMMITTED.items()]
    committer.commit(offsets=offsets, asynchronous=False)
    committer.close()


def join_group(bootstrap: str) -> Consumer:
    """A member of the group, assigned the topic, which commits nothing more."""
    member = Consumer(GROUP_SETTINGS | {"bootstrap.servers": bootstrap, "client.id": MEMBER})
    member.subscribe([TOPIC])
    deadline = time.monotonic() + 60
    while not member.assignment():
        assert time.monotonic() < deadline, "the member was not assigned the topic"
        member.poll(0.2)
    return member


def cells(table: str, field: str) -> str:
    """A JavaScript expression: the texts of one column of one of the page's tables."""
    return (
        f"[...document.querySelectorAll('#{table} td[data-field=\"{field}\"]')]"
        ".map(c => c.textContent)"
    )


def column_is(table: str, field: str, values: list[object]) -> str:
    """A JavaScript expression: does the column read ``values``?"""
    wanted = json.dumps([str(v) for v in values], separators=(",", ":"))
    return f"JSON.stringify({cells(table, field)}) === {json.dumps(wanted)}"


def chart_sum(chart: str) -> str:
    """A JavaScript expression: the records a chart shows over its window."""
    return f"Number(document.querySelector('#{chart}')?.dataset.sum || 0)"


@pytest.mark.skipif(chromium_path() is None, reason="Debian's chromium is not installed")
def test_console_pages_in_chromium(broker_factory: BrokerFactory, tmp_path: Path) -> None:
    broker = broker_factory(CONSOLE)
    url = console_url(broker)
    make_topic_and_group(broker.bootstrap)
    member = join_group(broker.bootstrap)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    try:
        with Chromium(tmp_path / "chromium") as chromium:
            asyncio.run(look_at_the_console(chromium, url, broker.bootstrap))
    finally:
        member.close()
    print(f"console screenshots: {ARTIFACTS}")


async def look_at_the_console(chromium: Chromium, url: str, bootstrap: str) -> None:
    records = PARTITIONS * PER_PARTITION
    async with aiohttp.ClientSession() as session:
        page = await chromium.page(session)

        await page.navigate(f"{url}/#/")
        await page.wait_for(column_is("brokers", "port", [bootstrap.rsplit(":", 1)[1]]))
        await page.wait_for(f"{chart_sum('chart-records')} >= {records}")
        # The latency chart draws the request times the broker counts, Produce among them.
        latency_legend = "document.querySelector('#chart-latency')?.textContent || ''"
        await page.wait_for(f"({latency_legend}).includes('Produce')")
        await page.screenshot(ARTIFACTS / "cluster.png")

        await page.navigate(f"{url}/#/topics")
        await page.wait_for(f"{cells('topics', 'name')}.includes('{TOPIC}')")
        names = await page.evaluate(cells("topics", "name"))
        counts = await page.evaluate(cells("topics", "partition_count"))
        assert dict(zip(names, counts, strict=True))[TOPIC] == str(PARTITIONS)
        await page.screenshot(ARTIFACTS / "topics.png")

        await page.navigate(f"{url}/#/topics/{TOPIC}")
        await page.wait_for(column_is("partitions", "end_offset", [PER_PARTITION] * PARTITIONS))
        assert await page.evaluate(cells("partitions", "start_offset")) == ["0"] * PARTITIONS
        assert await page.evaluate(cells("partitions", "isr")) == ["0"] * PARTITIONS

        await page.navigate(f"{url}/#/groups")
        await page.wait_for(column_is("groups", "lag", [LAG]))
        assert await page.evaluate(cells("groups", "group_id")) == [GROUP]
        assert await page.evaluate(cells("groups", "members")) == ["1"]
        await page.screenshot(ARTIFACTS / "groups.png")

        await page.navigate(f"{url}/#/groups/{GROUP}")
        lags = [PER_PARTITION - offset for offset in COMMITTED.values()]
        await page.wait_for(column_is("offsets", "lag", lags))
        assert await page.evaluate("document.querySelector('#group-lag').textContent") == str(LAG)
        assert await page.evaluate(cells("members", "client_id")) == [MEMBER]
        assignment = f"{TOPIC}: {','.join(map(str, range(PARTITIONS)))}"
        assert await page.evaluate(cells("members", "assignment")) == [assignment]
        await page.screenshot(ARTIFACTS / "group.png")

        # The topic's chart takes in records produced while it is on screen.
        await page.navigate(f"{url}/#/topics/{TOPIC}")
        await page.wait_for(f"{chart_sum('chart-topic-records')} === {records}")
        await asyncio.to_thread(produce, bootstrap, {2: MORE})
        await page.wait_for(f"{chart_sum('chart-topic-records')} === {records + MORE}")
        ends = [PER_PARTITION, PER_PARTITION, PER_PARTITION + MORE]
        await page.wait_for(column_is("partitions", "end_offset", ends))
        await page.screenshot(ARTIFACTS / "topic.png")


def test_console_admin_actions(broker_factory: BrokerFactory) -> None:
    """With ``console.admin.enable`` a topic is created and deleted, with CreateTopics'
    validation, and a group deleted; without it every change is refused."""
    read_only = broker_factory(CONSOLE)
    admin = broker_factory(CONSOLE | {"console.admin.enable": "true"})
    asyncio.run(use_admin_actions(console_url(read_only), console_url(admin), admin.bootstrap))


async def use_admin_actions(read_only: str, url: str, bootstrap: str) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{read_only}/api/topics", json={"name": "refused"}) as answer:
            assert answer.status == 403
            assert (await answer.json())["message"] == "console.admin.enable is false"
        async with http.delete(f"{read_only}/api/groups/{GROUP}") as answer:
            assert answer.status == 403

        new = {"name": "made-in-console", "partitions": 0}
        async with http.post(f"{url}/api/topics", json=new) as answer:
            assert answer.status == 400
            assert (await answer.json())["error"] == "INVALID_PARTITIONS"
        async with http.post(f"{url}/api/topics", json=new | {"partitions": 2}) as answer:
            assert answer.status == 200, await answer.text()
        async with http.get(f"{url}/api/topics/made-in-console") as answer:
            assert (await answer.json())["partition_count"] == 2
        async with http.post(f"{url}/api/topics", json=new | {"partitions": 2}) as answer:
            assert (await answer.json())["error"] == "TOPIC_ALREADY_EXISTS"
        elsewhere = {"Origin": "http://example.invalid"}
        async with http.delete(f"{url}/api/topics/made-in-console", headers=elsewhere) as answer:
            assert answer.status == 403
        async with http.delete(f"{url}/api/topics/made-in-console") as answer:
            assert answer.status == 200, await answer.text()
        async with http.get(f"{url}/api/topics/made-in-console") as answer:
            assert answer.status == 404

        await asyncio.to_thread(make_topic_and_group, bootstrap)
        async with http.delete(f"{url}/api/groups/{GROUP}") as answer:
            assert answer.status == 200, await answer.text()
        async with http.get(f"{url}/api/groups/{GROUP}") as answer:
            assert answer.status == 404


def test_slow_http_clients_do_not_stall_kafka(broker_factory: BrokerFactory) -> None:
    """Connections to the console that send headers one byte at a time, and idle ones, do
    not keep the Kafka listener from answering ApiVersions and Metadata: each is answered
    while all of them are still open and unfinished, and the console still answers too."""
    broker = broker_factory(CONSOLE)
    host, port = console_url(broker).removeprefix("http://").rsplit(":", 1)
    slow = [socket.create_connection((host, int(port)), timeout=10) for _ in range(SLOW_CLIENTS)]
    idle = [socket.create_connection((host, int(port)), timeout=10) for _ in range(SLOW_CLIENTS)]
    try:
        request_line = b"GET /api/topics HTTP/1.1\r\nHost: x\r\nX-Slow: "
        with Wire(broker.bootstrap) as kafka:
            for i in range(ROUNDS):
                for connection in slow:
                    connection.sendall(request_line[i : i + 1] or b"a")
                assert kafka.call(VERSIONS_REQUEST, 3).error_code == 0
                brokers = kafka.call(MetadataRequest(topics=None), 12).brokers
                assert [b.port for b in brokers] == [int(broker.bootstrap.rsplit(":", 1)[1])]
        for connection in slow + idle:  # none was answered or closed: all still held
            connection.setblocking(False)
            with pytest.raises(BlockingIOError):
                connection.recv(1)
        answer = asyncio.run(get_json(f"http://{host}:{port}/api/cluster"))
        assert answer["brokers"][0]["id"] == 0
    finally:
        for connection in slow + idle:
            connection.close()


SLOW_CLIENTS = 100
ROUNDS = 60
VERSIONS_REQUEST = ApiVersionsRequest(
    client_software_name="console-test", client_software_version="1"
)


async def get_json(url: str) -> dict:
    async with aiohttp.ClientSession() as http, http.get(url) as answer:
        return await answer.json()


def test_consumer_and_share_groups_in_the_json_api(broker_factory: BrokerFactory) -> None:
    """A KIP-848 consumer group (confluent-kafka, ``group.protocol=consumer``) and a
    KIP-932 share group (a raw ShareGroupHeartbeat) are listed with their type and
    members; the consumer group's lag is its committed offsets' distance to the end."""
    broker = broker_factory(CONSOLE)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
    produce(broker.bootstrap, dict.fromkeys(range(PARTITIONS), PER_PARTITION))
    member = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "new-protocol",
            "group.protocol": "consumer",
            "enable.auto.commit": False,
        }
    )
    member.subscribe([TOPIC])
    deadline = time.monotonic() + 60
    while len(member.assignment()) < PARTITIONS:
        assert time.monotonic() < deadline, "the member was not assigned every partition"
        member.poll(0.2)
    offsets = [TopicPartition(TOPIC, p, o) for p, o in COMMITTED.items()]
    member.commit(offsets=offsets, asynchronous=False)
    find_coordinator(broker.bootstrap, "sharing")
    with Wire(broker.bootstrap) as kafka:
        joined = kafka.call(
            ShareGroupHeartbeatRequest(
                group_id="sharing",
                member_id=str(uuid.uuid4()),
                member_epoch=0,
                subscribed_topic_names=[TOPIC],
            ),
            1,
        )
        assert joined.error_code == 0, joined
        try:
            groups, new, shared = asyncio.run(
                get_groups(console_url(broker), "new-protocol", "sharing")
            )
        finally:
            member.close()
    listed = {g["group_id"]: (g["type"], g["members"]) for g in groups}
    assert listed == {"new-protocol": ("consumer", 1), "sharing": ("share", 1)}
    assert new["lag"] == LAG
    assert new["members"][0]["assignment"] == {TOPIC: list(range(PARTITIONS))}
    assert [m["member_id"] for m in shared["members"]] == [joined.member_id]


async def get_groups(url: str, *group_ids: str) -> list[Any]:
    async with aiohttp.ClientSession() as http:
        answers = [await (await http.get(f"{url}/api/groups")).json()]
        for group_id in group_ids:
            async with http.get(f"{url}/api/groups/{group_id}") as answer:
                answers.append(await answer.json())
    return answers
