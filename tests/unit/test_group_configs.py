"""Group configs (KIP-848's GROUP config resource, type 32): the table, Kafka 4.4's validation,
DescribeConfigs' entries, the config APIs and ListConfigResources on groups, the metadata
store's /config/groups, and the coordinator honouring a group's session timeout and heartbeat
interval.

The expected values are what Kafka 4.4 answers (``kafka-configs.sh --describe --entity-type
groups --entity-name g1 --all``, and its errors for out-of-range values).
"""

from __future__ import annotations

import pytest

from kpybroker.config import (
    BROKER_CONFIGS,
    GROUP_CONFIGS,
    BrokerConfig,
    ConfigError,
    ConfigSource,
    validate_group_configs,
)
from kpybroker.config.describe import group_config_entries
from kpybroker.config.group_table import java_duration_ms
from kpybroker.coordinator.coordinator_settings import CoordinatorSettings
from kpybroker.coordinator.group_configs import ClusterGroupConfigs
from kpybroker.coordinator.interface import CONSUMER_SESSION_TIMER, GroupOverrides, TimerKey
from kpybroker.metadata.cluster_metadata import ClusterMetadata
from kpybroker.metadata.model import ChangeKind, MetadataChange
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import (
    alter_configs,
    describe_configs,
    incremental_alter_configs,
    list_config_resources,
)
from tests.helpers.coordinator_driver import SETTINGS, Driver, StaticTopics
from tests.helpers.fake_services import call, services
from tests.helpers.metadata_backends import Backend, Recorder, scenario
from tests.helpers.waiting import eventually

GROUP = 32
SET, DELETE, APPEND = 0, 1, 2

#: ``kafka-configs.sh --describe --entity-type groups --entity-name g1 --all`` against Kafka 4.4.
KAFKA_DESCRIBE_ALL = """
consumer.assignment.interval.ms=1000 {DEFAULT_CONFIG:group.consumer.assignment.interval.ms=1000}
consumer.heartbeat.interval.ms=5000 {DEFAULT_CONFIG:group.consumer.heartbeat.interval.ms=5000}
consumer.session.timeout.ms=45000 {DEFAULT_CONFIG:group.consumer.session.timeout.ms=45000}
errors.deadletterqueue.copy.record.enable=false {DEFAULT_CONFIG:errors.deadletterqueue.copy.record.enable=false}
errors.deadletterqueue.topic.name= {DEFAULT_CONFIG:errors.deadletterqueue.topic.name=}
share.assignment.interval.ms=1000 {DEFAULT_CONFIG:group.share.assignment.interval.ms=1000}
share.auto.offset.reset=latest {DEFAULT_CONFIG:share.auto.offset.reset=latest}
share.delivery.count.limit=5 {DEFAULT_CONFIG:group.share.delivery.count.limit=5}
share.heartbeat.interval.ms=5000 {DEFAULT_CONFIG:group.share.heartbeat.interval.ms=5000}
share.isolation.level=read_uncommitted {DEFAULT_CONFIG:share.isolation.level=read_uncommitted}
share.partition.max.record.locks=2000 {DEFAULT_CONFIG:group.share.partition.max.record.locks=2000}
share.record.lock.duration.ms=30000 {DEFAULT_CONFIG:group.share.record.lock.duration.ms=30000}
share.renew.acknowledge.enable=true {DEFAULT_CONFIG:share.renew.acknowledge.enable=true}
share.session.timeout.ms=45000 {DEFAULT_CONFIG:group.share.session.timeout.ms=45000}
streams.assignment.interval.ms=1000 {DEFAULT_CONFIG:group.streams.assignment.interval.ms=1000}
streams.assignor.name=sticky {DEFAULT_CONFIG:group.streams.assignors=sticky}
streams.heartbeat.interval.ms=5000 {DEFAULT_CONFIG:group.streams.heartbeat.interval.ms=5000}
streams.initial.rebalance.delay.ms=3000 {DEFAULT_CONFIG:group.streams.initial.rebalance.delay.ms=3000}
streams.num.standby.replicas=0 {DEFAULT_CONFIG:group.streams.num.standby.replicas=0}
streams.rack.aware.assignment.tags= {DEFAULT_CONFIG:group.streams.rack.aware.assignment.tags=}
streams.session.timeout.ms=45000 {DEFAULT_CONFIG:group.streams.session.timeout.ms=45000}
"""  # noqa: E501


def as_tool_prints(entries) -> str:
    """The entries as ``kafka-configs.sh --describe --all`` prints them (synonyms abridged)."""
    lines = []
    for e in entries:
        synonyms = ", ".join(f"{s.source.name}:{s.name}={s.value}" for s in e.synonyms)
        lines.append(f"{e.name}={e.value} {{{synonyms}}}")
    return "\n" + "\n".join(lines) + "\n"


# -- the table and its defaults --------------------------------------------------------------


def test_a_group_without_overrides_is_described_as_kafka_describes_it() -> None:
    assert as_tool_prints(group_config_entries(BrokerConfig(), {})) == KAFKA_DESCRIBE_ALL


def test_every_synonym_is_a_broker_config_with_the_same_default() -> None:
    for name, key in GROUP_CONFIGS.items():
        for synonym in key.synonyms:
            assert synonym in BROKER_CONFIGS, name
            broker_default = BROKER_CONFIGS[synonym].default
            if name == "streams.assignor.name":
                assert broker_default == ("sticky",)
            else:
                assert broker_default == key.default, name
    assert {n for n, k in GROUP_CONFIGS.items() if k.enforced} == {
        "consumer.session.timeout.ms",
        "consumer.heartbeat.interval.ms",
        "share.session.timeout.ms",
        "share.heartbeat.interval.ms",
        "share.assignment.interval.ms",
        "share.record.lock.duration.ms",
        "share.delivery.count.limit",
        "share.partition.max.record.locks",
        "share.auto.offset.reset",
        "share.isolation.level",
    }


def test_an_override_comes_first_then_the_broker_layers() -> None:
    broker = BrokerConfig({"group.consumer.heartbeat.interval.ms": "6000"})
    overrides = {"consumer.session.timeout.ms": "50000", "share.auto.offset.reset": "earliest"}
    entries = {e.name: e for e in group_config_entries(broker, overrides)}
    session = entries["consumer.session.timeout.ms"]
    assert (session.value, session.source, session.read_only) == (
        "50000",
        ConfigSource.GROUP_CONFIG,
        False,
    )
    assert [(s.source.name, s.name, s.value) for s in session.synonyms] == [
        ("GROUP_CONFIG", "consumer.session.timeout.ms", "50000"),
        ("DEFAULT_CONFIG", "group.consumer.session.timeout.ms", "45000"),
    ]
    reset = entries["share.auto.offset.reset"]
    assert [(s.source.name, s.name, s.value) for s in reset.synonyms] == [
        ("GROUP_CONFIG", "share.auto.offset.reset", "earliest"),
        ("DEFAULT_CONFIG", "share.auto.offset.reset", "latest"),
    ]
    heartbeat = entries["consumer.heartbeat.interval.ms"]
    assert (heartbeat.value, heartbeat.source) == ("6000", ConfigSource.STATIC_BROKER_CONFIG)
    assert heartbeat.config_type == 3 and heartbeat.documentation


def test_an_internal_config_is_described_only_when_set() -> None:
    plain = {e.name for e in group_config_entries(BrokerConfig(), {})}
    assert "consumer.assignor.offload.enable" not in plain
    entries = group_config_entries(BrokerConfig(), {"consumer.assignor.offload.enable": "false"})
    [offload] = [e for e in entries if e.name == "consumer.assignor.offload.enable"]
    assert [(s.source.name, s.name, s.value) for s in offload.synonyms] == [
        ("GROUP_CONFIG", "consumer.assignor.offload.enable", "false"),
        ("DEFAULT_CONFIG", "group.consumer.assignor.offload.enable", "true"),
    ]


# -- validation, as Kafka 4.4's GroupConfig.validate ----------------------------------------


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        ({"nope": "1"}, "Unknown group config name: nope"),
        (
            {"consumer.session.timeout.ms": "5000"},
            "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive.",
        ),
        (
            {"consumer.heartbeat.interval.ms": "20000"},
            "consumer.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive.",
        ),
        (
            {"consumer.session.timeout.ms": "abc"},
            "Invalid value abc for configuration consumer.session.timeout.ms: "
            "Not a number of type INT",
        ),
        (
            {"consumer.session.timeout.ms": "0"},
            "Invalid value 0 for configuration consumer.session.timeout.ms: "
            "Value must be at least 1",
        ),
        (
            {"share.record.lock.duration.ms": "10000"},
            "share.record.lock.duration.ms must be in the range 15000 to 60000 inclusive.",
        ),
        (
            {"share.delivery.count.limit": "20"},
            "share.delivery.count.limit must be in the range 2 to 10 inclusive.",
        ),
        (
            {"share.partition.max.record.locks": "50"},
            "Invalid value 50 for configuration share.partition.max.record.locks: "
            "Value must be at least 100",
        ),
        (
            {"consumer.assignment.interval.ms": "20000"},
            "consumer.assignment.interval.ms must be in the range 0 to 15000 inclusive.",
        ),
        (
            {"streams.num.standby.replicas": "5"},
            "streams.num.standby.replicas must be less than or equal to 2",
        ),
        (
            {"streams.task.offset.interval.ms": "100"},
            "streams.task.offset.interval.ms must be greater than or equal to 15000",
        ),
        (
            {"streams.assignor.name": "foo"},
            "streams.assignor.name 'foo' is not a registered task assignor. "
            "Registered assignors are: [sticky].",
        ),
        (
            {"streams.rack.aware.assignment.tags": " a ,b,a"},
            "streams.rack.aware.assignment.tags must not contain duplicate tag keys.",
        ),
        (
            {"streams.rack.aware.assignment.tags": "a,,b"},
            "Configuration 'streams.rack.aware.assignment.tags' values must not be empty.",
        ),
        (
            {"errors.deadletterqueue.topic.name": "__x"},
            "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'",
        ),
        (
            {"share.isolation.level": "READ_COMMITTED"},
            "Invalid value READ_COMMITTED for configuration share.isolation.level: "
            "String must be one of: read_committed, read_uncommitted",
        ),
        (
            {"share.auto.offset.reset": "EARLIEST"},
            "Invalid value EARLIEST for configuration share.auto.offset.reset: Invalid value "
            "`EARLIEST` for configuration share.auto.offset.reset. The value must be either "
            "'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.",
        ),
        # Kafka checks the broker's bounds in its own order, not the request's.
        (
            {"share.delivery.count.limit": "20", "consumer.session.timeout.ms": "1"},
            "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive.",
        ),
        # Values are parsed before any bound is checked, in the table's order.
        (
            {"share.session.timeout.ms": "5", "consumer.session.timeout.ms": "0"},
            "Invalid value 0 for configuration consumer.session.timeout.ms: "
            "Value must be at least 1",
        ),
    ],
)
def test_invalid_group_configs_are_refused_in_kafkas_words(configs, message) -> None:
    with pytest.raises(ConfigError) as refused:
        validate_group_configs(configs, BrokerConfig())
    assert refused.value.code == ErrorCode.INVALID_CONFIG
    assert refused.value.message == message


@pytest.mark.parametrize(
    "value",
    ["earliest", " latest ", "by_duration:P1D", "by_duration:PT0S", "by_duration:P1DT2H3M4.5S"],
)
def test_share_auto_offset_reset_takes_kafkas_values(value: str) -> None:
    assert validate_group_configs({"share.auto.offset.reset": value}, BrokerConfig())


@pytest.mark.parametrize(
    "value",
    ["none", "by_duration:PT-1H", "by_duration:-PT1H", "by_duration:", "By_Duration:PT1H",
     "by_duration:PT1.5H", "by_duration:xx"],
)  # fmt: skip
def test_share_auto_offset_reset_refuses_what_kafka_refuses(value: str) -> None:
    with pytest.raises(ConfigError):
        validate_group_configs({"share.auto.offset.reset": value}, BrokerConfig())


def test_java_durations() -> None:
    assert java_duration_ms("PT1H") == 3_600_000
    assert java_duration_ms("p1dt0.5s") == 86_400_500
    assert java_duration_ms("PT-1.5S") == -1500
    assert java_duration_ms("PT") is None and java_duration_ms("P") is None


def test_the_bounds_are_the_brokers() -> None:
    broker = BrokerConfig(
        {
            "group.consumer.min.session.timeout.ms": "10000",
            "group.consumer.session.timeout.ms": "20000",
        }
    )
    assert validate_group_configs({"consumer.session.timeout.ms": "10000"}, broker) == {
        "consumer.session.timeout.ms": 10_000
    }
    broker = BrokerConfig(
        {
            "group.consumer.min.session.timeout.ms": "1000",
            "group.consumer.session.timeout.ms": "20000",
            "group.consumer.max.heartbeat.interval.ms": "30000",
        }
    )
    with pytest.raises(ConfigError, match=r"^consumer\.session\.timeout\.ms must be greater than "):
        validate_group_configs({"consumer.heartbeat.interval.ms": "25000"}, broker)


# -- the config APIs on a GROUP resource -----------------------------------------------------


def describe(
    name: str, *, keys: list[str] | None = None
) -> describe_configs.DescribeConfigsRequest:
    return describe_configs.DescribeConfigsRequest(
        resources=[
            describe_configs.DescribeConfigsResource(
                resource_type=GROUP, resource_name=name, configuration_keys=keys
            )
        ],
        include_synonyms=True,
        include_documentation=False,
    )


def incremental(name: str, *ops: tuple[str, int, str | None], validate_only: bool = False):
    return incremental_alter_configs.IncrementalAlterConfigsRequest(
        resources=[
            incremental_alter_configs.AlterConfigsResource(
                resource_type=GROUP,
                resource_name=name,
                configs=[
                    incremental_alter_configs.AlterableConfig(
                        name=key, config_operation=op, value=value
                    )
                    for key, op, value in ops
                ],
            )
        ],
        validate_only=validate_only,
    )


def outcome(response) -> tuple[int, str | None]:
    [result] = response.responses
    return result.error_code, result.error_message


def test_a_group_that_does_not_exist_is_configured_described_and_listed() -> None:
    s = services()
    assert outcome(
        call(s, incremental("g1", ("consumer.session.timeout.ms", SET, "50000")), 1)
    ) == (
        0,
        None,
    )
    assert s.cluster.group_config("g1") == {"consumer.session.timeout.ms": "50000"}
    [result] = call(s, describe("g1", keys=["consumer.session.timeout.ms"]), 4).results
    assert (result.error_code, result.resource_type, result.resource_name) == (0, GROUP, "g1")
    [entry] = result.configs
    assert (entry.value, entry.config_source, entry.read_only) == ("50000", 8, False)
    listed = call(s, list_config_resources.ListConfigResourcesRequest(resource_types=[32]), 1)
    assert [(r.resource_type, r.resource_name) for r in listed.config_resources] == [(32, "g1")]

    deleted = incremental("g1", ("consumer.session.timeout.ms", DELETE, None))
    assert outcome(call(s, deleted, 1)) == (0, None)
    listed = call(s, list_config_resources.ListConfigResourcesRequest(resource_types=[]), 1)
    assert [r.resource_type for r in listed.config_resources] == [8, 4]  # loggers, broker


def test_groups_come_first_in_list_config_resources() -> None:
    s = services()
    for name in ("b", "a"):
        call(s, incremental(name, ("consumer.session.timeout.ms", SET, "50000")), 1)
    listed = call(s, list_config_resources.ListConfigResourcesRequest(resource_types=[2, 32]), 1)
    assert [(r.resource_type, r.resource_name) for r in listed.config_resources] == [
        (32, "a"),
        (32, "b"),
    ]


def test_group_config_errors() -> None:
    s = services()
    too_short = incremental("g", ("consumer.session.timeout.ms", SET, "5000"))
    assert outcome(call(s, too_short, 1)) == (
        ErrorCode.INVALID_CONFIG,
        "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive.",
    )
    unknown = incremental("g", ("nope", SET, "1"))
    assert outcome(call(s, unknown, 1)) == (
        ErrorCode.INVALID_CONFIG,
        "Unknown group config name: nope",
    )
    # Kafka's controller knows no group config as a list.
    append = incremental("g", ("streams.rack.aware.assignment.tags", APPEND, "a"))
    assert outcome(call(s, append, 1)) == (
        ErrorCode.INVALID_CONFIG,
        "Can't APPEND to key streams.rack.aware.assignment.tags because its type is not LIST.",
    )
    no_name = incremental("", ("consumer.session.timeout.ms", SET, "50000"))
    assert outcome(call(s, no_name, 1)) == (
        ErrorCode.INVALID_REQUEST,
        "Default group resources are not allowed.",
    )
    checked = incremental("g", ("consumer.session.timeout.ms", SET, "50000"), validate_only=True)
    assert outcome(call(s, checked, 1)) == (0, None)
    assert s.cluster.group_config("g") == {}
    [result] = call(s, describe(""), 4).results
    assert (result.error_code, result.error_message, result.configs) == (
        ErrorCode.INVALID_REQUEST,
        "Group name must not be empty",
        [],
    )


def test_alter_configs_replaces_a_groups_whole_set() -> None:
    s = services()
    call(s, incremental("g", ("consumer.session.timeout.ms", SET, "50000")), 1)
    request = alter_configs.AlterConfigsRequest(
        resources=[
            alter_configs.AlterConfigsResource(
                resource_type=GROUP,
                resource_name="g",
                configs=[
                    alter_configs.AlterableConfig(
                        name="consumer.heartbeat.interval.ms", value="6000"
                    )
                ],
            )
        ],
        validate_only=False,
    )
    [result] = call(s, request, 2).responses
    assert result.error_code == 0
    assert s.cluster.group_config("g") == {"consumer.heartbeat.interval.ms": "6000"}


# -- the metadata store ----------------------------------------------------------------------


@scenario
async def test_group_configs_are_stored_for_every_broker(backend: Backend) -> None:
    writer = ClusterMetadata(await backend.connect())
    follower = ClusterMetadata(await backend.connect())
    await writer.start()
    await follower.start()
    changes = Recorder()
    follower.add_listener(changes)
    odd = "gé/ x*+~%41"  # a group id may hold any character
    for group_id in (odd, ".", "plain"):
        await writer.set_group_config(group_id, {"consumer.session.timeout.ms": "50000"})
    assert writer.group_config(odd) == {"consumer.session.timeout.ms": "50000"}
    await eventually(lambda: sorted(follower.configured_groups()) == sorted([odd, ".", "plain"]))
    assert follower.group_config(".") == {"consumer.session.timeout.ms": "50000"}
    assert MetadataChange(ChangeKind.GROUP_CONFIG, odd) in changes.events
    assert await writer.store.exists("/config/groups/g%C3%A9%2F%20x%2A%2B%7E%2541")

    await writer.set_group_config(odd, {})  # the last config deleted: the node goes
    await eventually(lambda: odd not in follower.configured_groups())
    assert follower.group_config(odd) == {}
    assert await writer.store.exists("/config/groups/g%C3%A9%2F%20x%2A%2B%7E%2541") is None
    await writer.set_group_config("never-configured", {})
    for cluster in (writer, follower):
        await cluster.close()
        await cluster.store.close()


# -- the coordinator ---------------------------------------------------------------------------


def heartbeat_interval_and_session(d: Driver, member: str = "a", group: str = "g"):
    response = d.consumer_heartbeat(member, 0, topics=["t"], group=group)
    deadline, _ = d.timers[TimerKey(CONSUMER_SESSION_TIMER, group, response.member_id)]
    return response.heartbeat_interval_ms, deadline - d.now


def test_a_groups_overrides_replace_the_brokers_settings() -> None:
    d = Driver(topics=StaticTopics(t=2))
    assert heartbeat_interval_and_session(d, group="plain") == (
        SETTINGS.consumer_heartbeat_interval_ms,
        SETTINGS.consumer_session_timeout_ms,
    )
    d.group_overrides["g"] = GroupOverrides(
        consumer_session_timeout_ms=50_000, consumer_heartbeat_interval_ms=6000
    )
    assert heartbeat_interval_and_session(d) == (6000, 50_000)


def test_a_silent_member_is_fenced_after_its_groups_session_timeout() -> None:
    d = Driver(topics=StaticTopics(t=2))
    d.group_overrides["g"] = GroupOverrides(consumer_session_timeout_ms=50_000)
    joined = d.consumer_heartbeat("a", 0, topics=["t"])
    d.advance(49_000)
    assert d.shard.consumer_groups.group("g").members  # type: ignore[union-attr]
    d.advance(2000)
    assert not d.shard.consumer_groups.group("g").members  # type: ignore[union-attr]
    fenced = d.consumer_heartbeat(joined.member_id, joined.member_epoch)
    assert fenced.error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_overrides_outside_the_brokers_bounds_are_held_within_them() -> None:
    """Kafka's GroupConfig.evaluate: bounds lowered after a group config was set cap it."""
    d = Driver(topics=StaticTopics(t=2))
    d.group_overrides["g"] = GroupOverrides(
        consumer_session_timeout_ms=SETTINGS.consumer_max_session_timeout_ms + 1,
        consumer_heartbeat_interval_ms=1,
    )
    assert heartbeat_interval_and_session(d) == (
        SETTINGS.consumer_min_heartbeat_interval_ms,
        SETTINGS.consumer_max_session_timeout_ms,
    )


class FakeMetadata:
    def __init__(self) -> None:
        self.configs: dict[str, dict[str, str]] = {}

    def group_config(self, group_id: str) -> dict[str, str]:
        return self.configs.get(group_id, {})


def test_the_runtime_reads_overrides_from_the_metadata_cache() -> None:
    cluster = FakeMetadata()
    configs = ClusterGroupConfigs(cluster)  # type: ignore[arg-type]
    assert configs("g") == GroupOverrides()
    cluster.configs["g"] = {"consumer.session.timeout.ms": "50000", "share.session.timeout.ms": "1"}
    assert configs("g") == GroupOverrides(
        consumer_session_timeout_ms=50_000, share_session_timeout_ms=1
    )
    cluster.configs["g"] = {"consumer.heartbeat.interval.ms": "6000"}
    assert configs("g") == GroupOverrides(consumer_heartbeat_interval_ms=6000)
    cluster.configs["g"] = {"share.assignment.interval.ms": "0"}
    assert configs("g") == GroupOverrides(share_assignment_interval_ms=0)
    cluster.configs["g"] = {"consumer.heartbeat.interval.ms": "soon"}  # not written by kpybroker
    assert configs("g") == GroupOverrides()


def test_the_coordinator_settings_hold_the_brokers_bounds() -> None:
    settings = CoordinatorSettings.from_config(
        BrokerConfig({"group.consumer.max.session.timeout.ms": "90000"})
    )
    assert settings.consumer_max_session_timeout_ms == 90_000
    assert settings.consumer_min_heartbeat_interval_ms == 5000
