"""Group configs (KIP-848's GROUP config resource) end to end: ``kafka-configs.sh --entity-type
groups`` describes, alters and deletes them, and a consumer-protocol group's members get the
group's heartbeat interval and are fenced after the group's session timeout.

Kafka applies a config change through its metadata log, so a change may show a moment later
there; the tests wait for it as a client would.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from kpybroker.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from kpybroker.protocol.messages.find_coordinator import FindCoordinatorRequest
from tests.helpers.brokers import BrokerFactory, ManagedBroker
from tests.helpers.groups_wire import Wire
from tests.helpers.process import ToolResult, ToolRunner, wait_until

pytestmark = pytest.mark.timeout(240)

CONFIG_COMMAND = "org.apache.kafka.tools.ConfigCommand"

#: Bounds low enough for a session to run out within a test.
SHORT_SESSIONS = {
    "group.consumer.min.session.timeout.ms": 1000,
    "group.consumer.min.heartbeat.interval.ms": 100,
    "group.initial.rebalance.delay.ms": 0,
}


def configs(java_tool: ToolRunner, broker: ManagedBroker, *args: str) -> ToolResult:
    return java_tool(CONFIG_COMMAND, "--bootstrap-server", broker.bootstrap, *args)


def group(name: str) -> tuple[str, ...]:
    return ("--entity-type", "groups", "--entity-name", name)


def dynamic_lines(java_tool: ToolRunner, broker: ManagedBroker, name: str) -> list[str]:
    return configs(java_tool, broker, "--describe", *group(name)).check().stdout.splitlines()


def test_kafka_configs_describes_alters_and_deletes_group_configs(
    broker: ManagedBroker, java_tool: ToolRunner
) -> None:
    everything = configs(java_tool, broker, "--describe", "--all", *group("gc-new")).check()
    lines = everything.stdout.splitlines()
    assert lines[0] == "All configs for group gc-new are:"
    assert (
        "  consumer.session.timeout.ms=45000 sensitive=false "
        "synonyms={DEFAULT_CONFIG:group.consumer.session.timeout.ms=45000}" in lines
    )
    assert (
        "  streams.assignor.name=sticky sensitive=false "
        "synonyms={DEFAULT_CONFIG:group.streams.assignors=sticky}" in lines
    )
    assert len(lines) == 1 + 21, everything.describe()
    missing = configs(java_tool, broker, "--describe", *group("gc-new")).check()
    assert "The group 'gc-new' doesn't exist and doesn't have dynamic config." in missing.stdout

    changes = "consumer.session.timeout.ms=50000,share.auto.offset.reset=earliest"
    altered = configs(java_tool, broker, "--alter", *group("gc-new"), "--add-config", changes)
    assert "Completed updating config for group gc-new." in altered.check().stdout
    expected = [
        "Dynamic configs for group gc-new are:",
        "  consumer.session.timeout.ms=50000 sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:"
        "consumer.session.timeout.ms=50000, "
        "DEFAULT_CONFIG:group.consumer.session.timeout.ms=45000}",
        "  share.auto.offset.reset=earliest sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:"
        "share.auto.offset.reset=earliest, DEFAULT_CONFIG:share.auto.offset.reset=latest}",
    ]
    wait_until(lambda: dynamic_lines(java_tool, broker, "gc-new") == expected, 30)
    # Every group with configs, found through ListConfigResources.
    configs(java_tool, broker, "--alter", *group("gc-other"),
            "--add-config", "consumer.heartbeat.interval.ms=6000").check()  # fmt: skip
    wait_until(
        lambda: (
            "Dynamic configs for group gc-other are:"
            in configs(java_tool, broker, "--describe", "--entity-type", "groups").check().stdout
        ),
        30,
    )
    listed = configs(java_tool, broker, "--describe", "--entity-type", "groups").check()
    assert set(expected) <= set(listed.stdout.splitlines()), listed.describe()

    refused = configs(java_tool, broker, "--alter", *group("gc-new"),
                      "--add-config", "consumer.session.timeout.ms=5000")  # fmt: skip
    assert refused.returncode != 0
    assert (
        "InvalidConfigurationException: consumer.session.timeout.ms must be in the range "
        "45000 to 60000 inclusive." in refused.stdout + refused.stderr
    ), refused.describe()
    unknown = configs(java_tool, broker, "--alter", *group("gc-new"),
                      "--add-config", "nope=1")  # fmt: skip
    assert unknown.returncode != 0
    assert "Unknown group config name: nope" in unknown.stdout + unknown.stderr

    configs(java_tool, broker, "--alter", *group("gc-new"),
            "--delete-config", "consumer.session.timeout.ms").check()  # fmt: skip
    wait_until(lambda: dynamic_lines(java_tool, broker, "gc-new") == expected[::2], 30)
    configs(java_tool, broker, "--alter", *group("gc-new"),
            "--delete-config", "share.auto.offset.reset").check()  # fmt: skip
    wait_until(
        lambda: (
            dynamic_lines(java_tool, broker, "gc-new")
            == ["The group 'gc-new' doesn't exist and doesn't have dynamic config."]
        ),
        30,
    )


class Member:
    """A consumer-protocol member speaking ConsumerGroupHeartbeat v1 itself."""

    def __init__(self, wire: Wire, group_id: str, topic: str) -> None:
        self.wire = wire
        self.group_id = group_id
        self.topic = topic
        self.member_id = uuid.uuid4().hex
        self.epoch = 0

    def heartbeat(self) -> int:
        """Join, or heartbeat at the current epoch; the heartbeat interval the broker tells."""
        joining = self.epoch == 0
        request = ConsumerGroupHeartbeatRequest(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=self.epoch,
            rebalance_timeout_ms=30_000 if joining else -1,
            subscribed_topic_names=[self.topic] if joining else None,
            topic_partitions=[] if joining else None,
        )
        response = self.wire.call(request, 1)
        assert response.error_code == ErrorCode.NONE, response
        self.epoch = response.member_epoch
        return response.heartbeat_interval_ms


def members(wire: Wire, group_id: str) -> list[str]:
    [described] = wire.call(ConsumerGroupDescribeRequest(group_ids=[group_id]), 1).groups
    return [m.member_id for m in described.members]


def test_a_groups_session_timeout_and_heartbeat_interval_are_its_own(
    broker_factory: BrokerFactory, java_tool: ToolRunner
) -> None:
    broker = broker_factory(SHORT_SESSIONS)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("gc-topic", 2, 1)])["gc-topic"].result(30)
    short_settings = "consumer.session.timeout.ms=2000,consumer.heartbeat.interval.ms=500"
    configs(java_tool, broker, "--alter", *group("gc-short"),
            "--add-config", short_settings).check()  # fmt: skip
    with Wire(broker.bootstrap) as wire:
        wait_until(
            lambda: (
                wire.call(FindCoordinatorRequest(key="gc-short", key_type=0), 3).error_code
                == ErrorCode.NONE
            ),
            60,
        )
        plain = Member(wire, "gc-plain", "gc-topic")
        assert plain.heartbeat() == 5000  # the broker's group.consumer.heartbeat.interval.ms

        # Kafka applies the group's config once its metadata reaches the coordinator.
        short: list[Member] = []

        def joined_with_the_groups_interval() -> bool:
            member = Member(wire, "gc-short", "gc-topic")
            short.append(member)
            return member.heartbeat() == 500

        wait_until(joined_with_the_groups_interval, 30)
        member = short[-1]
        assert member.heartbeat() == 500
        assert member.member_id in members(wire, "gc-short")

        # Silent for longer than the group's session (2 s), not the broker's (45 s).
        time.sleep(2.0)
        wait_until(lambda: member.member_id not in members(wire, "gc-short"), 10)
        assert plain.member_id in members(wire, "gc-plain")

        configs(java_tool, broker, "--alter", *group("gc-short"), "--delete-config",
                "consumer.session.timeout.ms,consumer.heartbeat.interval.ms").check()  # fmt: skip
        wait_until(lambda: Member(wire, "gc-short", "gc-topic").heartbeat() == 5000, 30)
