"""kpybroker.config: the config tables, server.properties parsing, precedence and validation."""

import logging
import math
import re

import pytest

from kpybroker.config import (
    BROKER_CONFIGS,
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigError,
    ConfigSource,
    ConfigSynonym,
    ConfigType,
    Listener,
    Password,
    PropertiesFormatError,
    UpdateMode,
    broker_config_synonyms,
    effective_topic_config,
    parse_override,
    parse_properties,
    read_properties,
    topic_config_source,
    topic_config_synonyms,
    topic_defaults,
    validate_topic_configs,
)
from kpybroker.config.core import (
    GZIP_LEVEL,
    LONG_MAX,
    ConfigKey,
    EachOneOf,
    Importance,
    OneOf,
    Range,
    index_keys,
)
from kpybroker.protocol.errors import ErrorCode, KafkaError

# --------------------------------------------------------------------------- properties files


def test_properties_comments_blank_lines_and_separators() -> None:
    text = (
        "# a comment\n"
        "   ! another comment, indented\n"
        "\n"
        "equals=1\n"
        "colon:2\n"
        "space 3\n"
        "tab\t4\n"
        "spaced = 5\n"
        "spaced_colon : 6\n"
        "key.only\n"
        "empty=\n"
        "hash=a # not a comment\n"
        "double==x\n"
        "ws_then_sep   =   y\n"
    )
    assert parse_properties(text) == {
        "equals": "1",
        "colon": "2",
        "space": "3",
        "tab": "4",
        "spaced": "5",
        "spaced_colon": "6",
        "key.only": "",
        "empty": "",
        "hash": "a # not a comment",
        "double": "=x",
        "ws_then_sep": "y",
    }


def test_properties_escaped_separators_in_keys() -> None:
    assert parse_properties(r"a\=b\:c\ d=v") == {"a=b:c d": "v"}


def test_properties_line_continuations() -> None:
    text = (
        "listeners=PLAINTEXT://:9092,\\\n"
        "          INTERNAL://:9093\n"
        "two=a\\\n"
        "  # not a comment here\\\n"
        "  !nor here\n"
        "even=ends with a backslash\\\\\n"
        "next=1\n"
    )
    assert parse_properties(text) == {
        "listeners": "PLAINTEXT://:9092,INTERNAL://:9093",
        "two": "a# not a comment here!nor here",
        "even": "ends with a backslash\\",
        "next": "1",
    }


def test_properties_blank_line_ends_a_continuation_and_comments_never_continue() -> None:
    text = "a=1\\\n   \nb=2\n# comment \\\nc=3\nlast=x\\"
    assert parse_properties(text) == {"a": "1", "b": "2", "c": "3", "last": "x"}


def test_properties_escapes() -> None:
    text = r"k=tab\tnl\ncr\rff\f\u00e9\u0041\q\\ \ud83d\ude00"
    assert parse_properties(text) == {"k": "tab\tnl\ncr\rff\féAq\\ 😀"}


def test_properties_malformed_unicode_escape() -> None:
    with pytest.raises(PropertiesFormatError, match=r"line 2: Malformed \\uxxxx encoding"):
        parse_properties("ok=1\nbad=\\u12G4\n")


def test_properties_line_endings_duplicates_and_trailing_whitespace() -> None:
    assert parse_properties("a=1\r\nb=2\rc=3\na=4  ") == {"a": "4  ", "b": "2", "c": "3"}


def test_read_properties_utf8_and_latin1(tmp_path) -> None:
    utf8 = tmp_path / "utf8.properties"
    utf8.write_bytes("log.dirs=/data/é\n".encode())
    latin1 = tmp_path / "latin1.properties"
    latin1.write_bytes("log.dirs=/data/é\n".encode("iso-8859-1"))
    assert read_properties(utf8) == {"log.dirs": "/data/é"}
    assert read_properties(latin1) == {"log.dirs": "/data/é"}


@pytest.mark.parametrize(
    ("arg", "expected"),
    [
        ("a=b", ("a", "b")),
        ("a=b=c", ("a", "b=c")),
        ("a=", ("a", "")),
        ("a", ("a", "")),
    ],
)
def test_parse_override(arg: str, expected: tuple[str, str]) -> None:
    assert parse_override(arg) == expected


def test_parse_override_needs_a_key() -> None:
    with pytest.raises(PropertiesFormatError):
        parse_override("=1")


# --------------------------------------------------------------------------- broker config


def test_defaults_start_a_broker_with_no_config() -> None:
    cfg = BrokerConfig()
    assert cfg["broker.id"] == 0
    assert cfg["node.id"] == 0
    assert cfg.listeners() == [Listener("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT")]
    assert [str(d) for d in cfg.log_dirs()] == ["kpybroker-data"]
    assert cfg["message.max.bytes"] == 1048588
    assert cfg["socket.request.max.bytes"] == 104857600
    assert cfg["offsets.topic.num.partitions"] == 50
    assert cfg["log.segment.bytes"] == 1 << 30
    assert cfg["log.cleanup.policy"] == ("delete",)
    assert cfg["zookeeper.connect"] is None
    assert cfg.retention_ms() == 7 * 24 * 3600 * 1000
    assert cfg.segment_ms() == 7 * 24 * 3600 * 1000
    assert cfg.segment_jitter_ms() == 0
    assert cfg.flush_ms() == LONG_MAX
    assert cfg.source("broker.id") is ConfigSource.DEFAULT_CONFIG
    assert cfg.unknown_keys == ()


def test_kafka_defaults_we_deliberately_change_are_documented() -> None:
    changed = {name for name, key in BROKER_CONFIGS.items() if key.kafka_default is not None}
    assert changed == {
        "broker.id",
        "node.id",
        "process.roles",
        "listeners",
        "log.dir",
        "offsets.topic.replication.factor",
        "transaction.state.log.replication.factor",
        "transaction.state.log.min.isr",
        "transaction.version",  # kpybroker's: a feature level in Kafka
        "share.version",  # kpybroker's: a feature level in Kafka
        "share.coordinator.state.topic.replication.factor",
        "share.coordinator.state.topic.min.isr",
        "metrics.listeners",  # kpybroker's own: Kafka is scraped through the JMX exporter
        "console.enable",  # kpybroker's: the web console
        "console.listeners",
        "console.admin.enable",
        "console.authentication",
    }
    assert BROKER_CONFIGS["broker.id"].kafka_default == "-1"
    assert BROKER_CONFIGS["log.dir"].kafka_default == "/tmp/kafka-logs"
    for name in changed:
        assert "kpybroker" in BROKER_CONFIGS[name].doc or "Kafka 4.0" in (
            BROKER_CONFIGS[name].kafka_default or ""
        )


def test_load_file_then_overrides(tmp_path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("broker.id=3\nnum.partitions=4\nlog.dirs=/a, /b\n")
    cfg = BrokerConfig.load(path, ["num.partitions=6", "auto.create.topics.enable=FALSE"])
    assert cfg["broker.id"] == 3
    assert cfg["node.id"] == 3
    assert cfg["num.partitions"] == 6
    assert cfg["auto.create.topics.enable"] is False
    assert [str(d) for d in cfg.log_dirs()] == ["/a", "/b"]
    assert cfg.source("num.partitions") is ConfigSource.STATIC_BROKER_CONFIG
    assert cfg.originals["num.partitions"] == "6"
    assert BrokerConfig.load(overrides={"num.partitions": "2"})["num.partitions"] == 2


def test_load_wants_a_list_of_overrides() -> None:
    with pytest.raises(TypeError):
        BrokerConfig.load(overrides="num.partitions=2")


def test_log_dirs_falls_back_to_log_dir() -> None:
    assert [str(d) for d in BrokerConfig({"log.dir": "/x,/y"}).log_dirs()] == ["/x", "/y"]
    assert [str(d) for d in BrokerConfig({"log.dirs": "/z", "log.dir": "/x"}).log_dirs()] == ["/z"]


def test_no_log_dir_is_refused() -> None:
    with pytest.raises(ConfigError, match="At least one log directory") as e:
        BrokerConfig({"log.dir": " "})
    assert e.value.key == "log.dirs"


def test_accessors_are_typed() -> None:
    cfg = BrokerConfig(
        {
            "delete.topic.enable": " False ",
            "log.cleaner.min.cleanable.ratio": "0.25",
            "offsets.topic.replication.factor": "1",
            "log.retention.bytes": "-1",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT , SSL:SSL",
            "ssl.keystore.password": "secret",
            "sasl.enabled.mechanisms": "",
            "log.dirs": " /data ",
        }
    )
    assert cfg["delete.topic.enable"] is False
    assert cfg["log.cleaner.min.cleanable.ratio"] == 0.25
    assert cfg.get_int("offsets.topic.replication.factor") == 1
    assert cfg.get_bool("delete.topic.enable") is False
    assert cfg.get_list("log.dirs") == ("/data",)  # a LIST since Kafka 4.4
    assert cfg["sasl.enabled.mechanisms"] == ()
    assert cfg.security_protocol_map() == {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL"}
    password = cfg["ssl.keystore.password"]
    assert isinstance(password, Password) and password.value == "secret"
    assert "secret" not in repr(password) and str(password) == "[hidden]"
    assert cfg.get("no.such.config", "fallback") == "fallback"
    with pytest.raises(KeyError, match=re.escape("Unknown broker config: no.such.config")):
        cfg["no.such.config"]


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("num.partitions", "0", "Invalid value 0 for configuration num.partitions: "
         "Value must be at least 1"),
        ("num.partitions", "many", "Invalid value many for configuration num.partitions: "
         "Not a number of type INT"),
        ("num.partitions", "1_000", "Not a number of type INT"),
        ("num.partitions", "2147483648", "Not a number of type INT"),
        ("offsets.topic.replication.factor", "32768", "Not a number of type SHORT"),
        ("log.retention.bytes", "9223372036854775808", "Not a number of type LONG"),
        ("log.cleaner.min.cleanable.ratio", "1.5", "Invalid value 1.5 for configuration "
         "log.cleaner.min.cleanable.ratio: Value must be no more than 1"),
        ("log.cleaner.min.cleanable.ratio", "inf", "Not a number of type DOUBLE"),
        ("delete.topic.enable", "yes", "Invalid value yes for configuration "
         "delete.topic.enable: Expected value to be either true or false"),
        ("log.message.timestamp.type", "createtime", "String must be one of: "
         "CreateTime, LogAppendTime"),
        ("log.cleanup.policy", "delete,,compact", "Invalid value  for configuration "
         "log.cleanup.policy: String must be one of: compact, delete"),
        ("compression.type", "brotli", "String must be one of: uncompressed, zstd, lz4, "
         "snappy, gzip, producer"),
        ("compression.gzip.level", "10", "Value must be between 1 and 9 or equal to -1"),
        ("security.inter.broker.protocol", "TLS", "String must be one of: PLAINTEXT, SSL, "
         "SASL_PLAINTEXT, SASL_SSL"),
    ],
)  # fmt: skip
def test_invalid_values_name_key_and_value(key: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        BrokerConfig({key: value})
    assert e.value.key == key
    assert message in str(e.value)
    assert key in str(e.value)
    assert isinstance(e.value, KafkaError) and e.value.code is ErrorCode.INVALID_CONFIG


def test_number_parsing_follows_java() -> None:
    cfg = BrokerConfig(
        {
            "num.partitions": "+3",
            "log.retention.bytes": "-9223372036854775808",
            "log.cleaner.min.cleanable.ratio": "5e-1",
            "log.cleaner.io.buffer.load.factor": ".9d",
        }
    )
    assert cfg["num.partitions"] == 3
    assert cfg["log.retention.bytes"] == -(2**63)
    assert cfg["log.cleaner.min.cleanable.ratio"] == 0.5
    assert cfg["log.cleaner.io.buffer.load.factor"] == 0.9
    assert math.isnan(BROKER_CONFIGS["log.cleaner.io.buffer.load.factor"].parse("NaN"))


def test_unknown_keys_are_warned_about_not_refused(tmp_path, caplog) -> None:
    path = tmp_path / "server.properties"
    path.write_text("brokr.id=1\nlistener.name.plaintext.foo=bar\n")
    with caplog.at_level(logging.WARNING, logger="kpybroker.config"):
        cfg = BrokerConfig.load(path)
    assert cfg.unknown_keys == ("brokr.id",)
    assert cfg.originals["brokr.id"] == "1"
    assert "The configuration 'brokr.id' was supplied but isn't a known config." in caplog.text
    assert "listener.name" not in caplog.text


def test_kafka_3x_server_properties_start_unchanged(caplog) -> None:
    text = """
        broker.id=0
        listeners=PLAINTEXT://localhost:9092
        num.network.threads=3
        num.io.threads=8
        socket.send.buffer.bytes=102400
        socket.receive.buffer.bytes=102400
        socket.request.max.bytes=104857600
        log.dirs=/tmp/kafka-logs
        num.partitions=1
        num.recovery.threads.per.data.dir=1
        offsets.topic.replication.factor=1
        transaction.state.log.replication.factor=1
        transaction.state.log.min.isr=1
        log.retention.hours=168
        log.retention.check.interval.ms=300000
        zookeeper.connect=localhost:2181
        zookeeper.connection.timeout.ms=18000
        group.initial.rebalance.delay.ms=0
        inter.broker.protocol.version=3.7
        log.message.format.version=2.8
        """
    with caplog.at_level(logging.WARNING):
        cfg = BrokerConfig.load(overrides=parse_properties(text))
    assert caplog.text == ""
    assert cfg["zookeeper.connect"] == "localhost:2181"
    assert not BROKER_CONFIGS["num.network.threads"].enforced
    assert BROKER_CONFIGS["zookeeper.connect"].enforced


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({}, 604800000),
        ({"log.retention.hours": "1"}, 3600000),
        ({"log.retention.minutes": "5", "log.retention.hours": "1"}, 300000),
        ({"log.retention.ms": "42", "log.retention.minutes": "5"}, 42),
        ({"log.retention.ms": "-1"}, -1),
        ({"log.retention.hours": "-1"}, -1),
        ({"log.retention.minutes": "-5"}, -1),
    ],
)
def test_retention_precedence_ms_minutes_hours(props: dict[str, str], expected: int) -> None:
    assert BrokerConfig(props).retention_ms() == expected


def test_retention_zero_is_refused() -> None:
    with pytest.raises(ConfigError, match="unlimited \\(-1\\) or, greater than or equal to 1"):
        BrokerConfig({"log.retention.ms": "0"})


def test_segment_jitter_and_flush_precedence() -> None:
    cfg = BrokerConfig({"log.roll.hours": "2", "log.roll.jitter.hours": "1"})
    assert cfg.segment_ms() == 7200000
    assert cfg.segment_jitter_ms() == 3600000
    cfg = BrokerConfig({"log.roll.ms": "1000", "log.roll.hours": "2", "log.roll.jitter.ms": "7"})
    assert cfg.segment_ms() == 1000
    assert cfg.segment_jitter_ms() == 7
    assert BrokerConfig({"log.flush.scheduler.interval.ms": "50"}).flush_ms() == 50
    cfg = BrokerConfig({"log.flush.interval.ms": "9", "log.flush.scheduler.interval.ms": "50"})
    assert cfg.flush_ms() == 9
    with pytest.raises(
        ConfigError, match=re.escape("log.roll.ms must be greater than or equal to 1")
    ):
        BrokerConfig({"log.roll.ms": "0"})


def test_broker_and_node_id() -> None:
    assert BrokerConfig({"node.id": "7"})["broker.id"] == 7
    assert BrokerConfig({"broker.id": "7"})["node.id"] == 7
    with pytest.raises(ConfigError, match=re.escape("same value as `broker.id`")) as e:
        BrokerConfig({"broker.id": "1", "node.id": "2"})
    assert e.value.key == "node.id"
    with pytest.raises(ConfigError, match=re.escape("broker.id: Value must be at least 0")) as e:
        BrokerConfig({"broker.id": "-1"})
    assert e.value.key == "broker.id"


def test_cross_config_rules() -> None:
    with pytest.raises(ConfigError) as e:
        BrokerConfig({"replica.fetch.wait.max.ms": "40000"})
    assert e.value.key == "replica.socket.timeout.ms"
    with pytest.raises(ConfigError) as e:
        BrokerConfig({"replica.fetch.wait.max.ms": "20000", "replica.lag.time.max.ms": "10000"})
    assert e.value.key == "replica.fetch.wait.max.ms"
    with pytest.raises(ConfigError, match=r"min.compaction.lag.ms \(10\) > max"):
        BrokerConfig(
            {"log.cleaner.min.compaction.lag.ms": "10", "log.cleaner.max.compaction.lag.ms": "5"}
        )


def test_share_groups_take_exactly_one_assignor_the_simple_one() -> None:
    """group.share.assignors: KIP-932's simple assignor, by name or Kafka's class name; a
    server.properties naming another assignor does not start a broker that lacks it."""
    for fine in ("simple", "org.apache.kafka.coordinator.group.assignor.SimpleAssignor"):
        assert BrokerConfig({"group.share.assignors": fine}).get_list("group.share.assignors")
    with pytest.raises(ConfigError, match="exactly one assignor, but found 2"):
        BrokerConfig({"group.share.assignors": "simple,simple"})
    with pytest.raises(ConfigError, match=r"Invalid value com\.example\.Custom"):
        BrokerConfig({"group.share.assignors": "com.example.Custom"})


def test_cordoned_log_dirs_are_entries_of_log_dirs_or_a_lone_star() -> None:
    """KafkaConfig.validateCordonedLogDirs, whose ``require`` a client altering the config is
    told as INVALID_REQUEST; the entries are compared as written in log.dirs (or log.dir)."""
    cfg = BrokerConfig({"log.dirs": "/data/a,/data/b"})
    for fine in ("/data/b", "/data/a,/data/b", "*", ""):
        cfg.with_dynamic(dynamic_broker={"cordoned.log.dirs": fine})
    BrokerConfig({"log.dir": "/data/c", "cordoned.log.dirs": "/data/c"})
    for wrong, message in (
        (
            "/data/b,/data/c,/data/d",
            "requirement failed: All entries in cordoned.log.dirs must be present in log.dirs or "
            "log.dir. Missing entries : /data/c,/data/d",
        ),
        (
            "*,/data/a",
            "requirement failed: When cordoned.log.dirs is set to *, it must not contain other "
            "values",
        ),
    ):
        with pytest.raises(ConfigError) as e:
            cfg.with_dynamic(dynamic_broker={"cordoned.log.dirs": wrong})
        assert (e.value.key, e.value.code, e.value.message) == (
            "cordoned.log.dirs",
            ErrorCode.INVALID_REQUEST,
            message,
        )


# --------------------------------------------------------------------------- listeners


def test_listener_forms() -> None:
    cfg = BrokerConfig(
        {
            "listeners": "PLAINTEXT://:9092, internal://[::1]:9093,EXTERNAL://host.example:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,"
            "external:sasl_ssl",
        }
    )
    assert cfg.listeners() == [
        Listener("PLAINTEXT", "", 9092, "PLAINTEXT"),
        Listener("INTERNAL", "::1", 9093, "PLAINTEXT"),
        Listener("EXTERNAL", "host.example", 0, "SASL_SSL"),
    ]
    assert cfg.listeners()[1].url == "INTERNAL://[::1]:9093"
    assert cfg.listeners()[0].url == "PLAINTEXT://:9092"


def test_ephemeral_ports_may_repeat_and_ipv4_ipv6_may_share_a_port() -> None:
    cfg = BrokerConfig(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
            "advertised.listeners": "PLAINTEXT://127.0.0.1:0",
        }
    )
    assert [ep.port for ep in cfg.listeners()] == [0, 0]
    cfg = BrokerConfig(
        {
            "listeners": "PLAINTEXT://127.0.0.1:9092,SSL://[::1]:9092",
            "advertised.listeners": "PLAINTEXT://127.0.0.1:9092",
        }
    )
    assert [ep.host for ep in cfg.listeners()] == ["127.0.0.1", "::1"]


@pytest.mark.parametrize(
    ("listeners", "message"),
    [
        ("PLAINTEXT:/localhost:9092", "Unable to parse PLAINTEXT:/localhost:9092 to a broker "
         "endpoint"),
        ("PLAINTEXT://localhost", "Unable to parse"),
        ("PLAINTEXT://localhost:99999", "out of range"),
        ("CUSTOM://localhost:9092", "No security protocol defined for listener CUSTOM"),
        ("PLAINTEXT://a:9092,plaintext://b:9093", "Each listener must have a different name"),
        ("PLAINTEXT://a:9092,SSL://b:9092", "Each listener must have a different port"),
    ],
)  # fmt: skip
def test_bad_listeners(listeners: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)) as e:
        BrokerConfig({"listeners": listeners})
    assert e.value.key == "listeners"
    assert listeners in str(e.value)


def test_advertised_listeners(monkeypatch) -> None:
    monkeypatch.setattr("socket.getfqdn", lambda: "broker1.example")
    cfg = BrokerConfig({"listeners": "PLAINTEXT://:0"})
    assert cfg.advertised_listeners() == [Listener("PLAINTEXT", "broker1.example", 0, "PLAINTEXT")]
    assert cfg.advertised_listeners({"PLAINTEXT": 40123})[0].port == 40123
    cfg = BrokerConfig(
        {
            "listeners": "PLAINTEXT://:9092",
            "advertised.listeners": "PLAINTEXT://public.example:19092",
        }
    )
    assert cfg.advertised_listeners() == [
        Listener("PLAINTEXT", "public.example", 19092, "PLAINTEXT")
    ]
    assert cfg.advertised_listeners({"PLAINTEXT": 40123})[0].port == 19092


@pytest.mark.parametrize(
    ("props", "key", "message"),
    [
        ({"listeners": "PLAINTEXT://0.0.0.0:9092"}, "advertised.listeners",
         "nonroutable meta-address 0.0.0.0"),
        ({"advertised.listeners": "SSL://h:1"}, "advertised.listeners",
         "must be equal to or a subset of the ones defined in listeners"),
        ({"listeners": "SSL://:9093"}, "inter.broker.listener.name",
         "must be a listener name defined in advertised.listeners"),
        ({"inter.broker.listener.name": "OTHER"}, "inter.broker.listener.name",
         "not found in listener.security.protocol.map"),
        ({"inter.broker.listener.name": "PLAINTEXT",
          "security.inter.broker.protocol": "PLAINTEXT"}, "inter.broker.listener.name",
         "Only one of"),
        ({"listener.security.protocol.map": "PLAINTEXT"}, "listener.security.protocol.map",
         "expected NAME:PROTOCOL"),
        ({"listener.security.protocol.map": "PLAINTEXT:TLS"}, "listener.security.protocol.map",
         "Invalid security protocol `TLS`"),
    ],
)  # fmt: skip
def test_listener_consistency(props: dict[str, str], key: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)) as e:
        BrokerConfig(props)
    assert e.value.key == key


def test_inter_broker_listener_name() -> None:
    assert BrokerConfig().inter_broker_listener_name() == "PLAINTEXT"
    cfg = BrokerConfig(
        {
            "listeners": "PLAINTEXT://:9092,REPL://:9093",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,REPL:PLAINTEXT",
            "inter.broker.listener.name": "repl",
        }
    )
    assert cfg.inter_broker_listener_name() == "REPL"


# --------------------------------------------------------------------------- dynamic, sources


def test_dynamic_layers_and_sources() -> None:
    cfg = BrokerConfig({"log.retention.hours": "1", "message.max.bytes": "2000"})
    cfg = cfg.with_dynamic(
        dynamic_default={"log.retention.ms": "100", "message.max.bytes": "3000"},
        dynamic_broker={"message.max.bytes": "4000"},
    )
    assert cfg["message.max.bytes"] == 4000
    assert cfg.source("message.max.bytes") is ConfigSource.DYNAMIC_BROKER_CONFIG
    assert cfg.retention_ms() == 100
    assert cfg.source("log.retention.ms") is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    assert cfg.source("log.retention.hours") is ConfigSource.STATIC_BROKER_CONFIG
    assert cfg.source("log.segment.bytes") is ConfigSource.DEFAULT_CONFIG
    assert cfg.synonyms("message.max.bytes") == [
        ConfigSynonym("message.max.bytes", "4000", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ConfigSynonym("message.max.bytes", "3000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ConfigSynonym("message.max.bytes", "2000", ConfigSource.STATIC_BROKER_CONFIG),
        ConfigSynonym("message.max.bytes", "1048588", ConfigSource.DEFAULT_CONFIG),
    ]
    assert cfg.synonyms("log.retention.ms") == [
        ConfigSynonym("log.retention.ms", "100", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ConfigSynonym("log.retention.hours", "1", ConfigSource.STATIC_BROKER_CONFIG),
        ConfigSynonym("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    ]
    # Keeping a layer: only the named one is replaced.
    assert cfg.with_dynamic(dynamic_broker={})["message.max.bytes"] == 3000


def test_dynamic_updates_are_checked() -> None:
    cfg = BrokerConfig()
    with pytest.raises(
        ConfigError, match=re.escape("Cannot update these configs dynamically: broker.id")
    ):
        cfg.with_dynamic(dynamic_broker={"broker.id": "3"})
    with pytest.raises(ConfigError, match="broker id must be specified: listeners") as e:
        cfg.with_dynamic(dynamic_default={"listeners": "PLAINTEXT://:1"})
    assert e.value.key == "listeners"
    with pytest.raises(ConfigError, match=re.escape("message.max.bytes")):
        cfg.with_dynamic(dynamic_broker={"message.max.bytes": "-1"})


def test_broker_synonyms_follow_kafka() -> None:
    assert broker_config_synonyms("log.retention.hours") == (
        "log.retention.ms",
        "log.retention.minutes",
        "log.retention.hours",
    )
    assert broker_config_synonyms("log.roll.ms") == ("log.roll.ms", "log.roll.hours")
    assert broker_config_synonyms("log.flush.interval.ms") == (
        "log.flush.interval.ms",
        "log.flush.scheduler.interval.ms",
    )
    assert broker_config_synonyms("log.flush.scheduler.interval.ms") == (
        "log.flush.scheduler.interval.ms",
    )
    assert broker_config_synonyms("listener.name.internal.ssl.keystore.location") == (
        "listener.name.internal.ssl.keystore.location",
        "ssl.keystore.location",
    )
    assert broker_config_synonyms("listener.name.sasl_ssl.plain.sasl.jaas.config") == (
        "listener.name.sasl_ssl.plain.sasl.jaas.config",
        "sasl.jaas.config",
    )
    # As in Kafka, describing log.retention.hours shows only hours entries.
    assert BrokerConfig({"log.retention.ms": "5"}).synonyms("log.retention.hours") == [
        ConfigSynonym("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG)
    ]


def test_described_values_are_written_as_kafka_writes_them() -> None:
    cfg = BrokerConfig({"log.cleaner.min.cleanable.ratio": "0.5"})
    assert cfg.synonyms("log.cleaner.io.max.bytes.per.second") == [
        ConfigSynonym(
            "log.cleaner.io.max.bytes.per.second",
            "1.7976931348623157E308",
            ConfigSource.DEFAULT_CONFIG,
        )
    ]
    assert cfg.synonyms("delete.topic.enable")[0].value == "true"
    assert cfg.synonyms("log.cleanup.policy")[0].value == "delete"
    assert BROKER_CONFIGS["log.cleaner.io.buffer.load.factor"].to_text(1e7) == "1.0E7"


def test_sensitive_values_are_not_described() -> None:
    cfg = BrokerConfig({"ssl.keystore.password": "secret"})
    assert BROKER_CONFIGS["ssl.keystore.password"].sensitive
    assert cfg.synonyms("ssl.keystore.password") == [
        ConfigSynonym("ssl.keystore.password", None, ConfigSource.STATIC_BROKER_CONFIG)
    ]


# --------------------------------------------------------------------------- topic configs


def test_topic_defaults_follow_broker_overrides() -> None:
    defaults = topic_defaults(
        BrokerConfig(
            {
                "log.retention.hours": "1",
                "log.roll.hours": "2",
                "message.max.bytes": "5000",
                "log.cleanup.policy": "compact, delete",
                "log.segment.bytes": "2097152",
                "compression.type": "zstd",
                "log.cleaner.delete.retention.ms": "10",
                "log.cleaner.min.cleanable.ratio": "0.1",
                "log.message.timestamp.type": "LogAppendTime",
                "min.insync.replicas": "2",
            }
        )
    )
    assert defaults["retention.ms"] == 3600000
    assert defaults["segment.ms"] == 7200000
    assert defaults["max.message.bytes"] == 5000
    assert defaults["cleanup.policy"] == ("compact", "delete")
    assert defaults["segment.bytes"] == 2097152
    assert defaults["compression.type"] == "zstd"
    assert defaults["delete.retention.ms"] == 10
    assert defaults["min.cleanable.dirty.ratio"] == 0.1
    assert defaults["message.timestamp.type"] == "LogAppendTime"
    assert defaults["min.insync.replicas"] == 2
    assert defaults["flush.ms"] == LONG_MAX
    assert defaults["remote.storage.enable"] is False
    assert defaults["leader.replication.throttled.replicas"] == ()
    assert set(defaults) == set(TOPIC_CONFIGS)


def test_topic_defaults_of_a_default_broker_are_kafkas() -> None:
    defaults = topic_defaults(BrokerConfig())
    assert defaults == {name: key.default for name, key in TOPIC_CONFIGS.items()}


def test_validate_topic_configs_returns_typed_values() -> None:
    parsed = validate_topic_configs(
        {
            "retention.ms": "-1",
            "cleanup.policy": "compact",
            "min.cleanable.dirty.ratio": "0.01",
            "unclean.leader.election.enable": "TRUE",
            "leader.replication.throttled.replicas": "0:1, 1:2",
            "follower.replication.throttled.replicas": "*",
            "segment.bytes": "1024",
        }
    )
    assert parsed == {
        "retention.ms": -1,
        "cleanup.policy": ("compact",),
        "min.cleanable.dirty.ratio": 0.01,
        "unclean.leader.election.enable": True,
        "leader.replication.throttled.replicas": ("0:1", "1:2"),
        "follower.replication.throttled.replicas": ("*",),
        "segment.bytes": 1024,
    }


@pytest.mark.parametrize(
    ("configs", "key", "message"),
    [
        ({"retention.ms": "abc"}, "retention.ms",
         "Invalid value abc for configuration retention.ms: Not a number of type LONG"),
        ({"retention.ms": "-2"}, "retention.ms",
         "Invalid value -2 for configuration retention.ms: Value must be at least -1"),
        ({"no.such.config": "1"}, "no.such.config", "Unknown topic config name: no.such.config"),
        ({"message.downconversion.enable": "true"}, "message.downconversion.enable",
         "Unknown topic config name: message.downconversion.enable"),
        ({"cleanup.policy": "delete,shred"}, "cleanup.policy",
         "Invalid value shred for configuration cleanup.policy: String must be one of: "
         "compact, delete"),
        ({"segment.bytes": "13"}, "segment.bytes",
         "Invalid value 13 for configuration segment.bytes: Value must be at least 14"),
        ({"min.insync.replicas": "0"}, "min.insync.replicas", "Value must be at least 1"),
        ({"compression.zstd.level": "23"}, "compression.zstd.level",
         "Value must be no more than 22"),
        ({"preallocate": "1"}, "preallocate", "Expected value to be either true or false"),
        ({"leader.replication.throttled.replicas": "0-1"},
         "leader.replication.throttled.replicas",
         "must be the literal '*' or a list of replicas"),
        ({"retention.ms": None}, "retention.ms",
         "Null value not supported for topic configs: retention.ms"),
        ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, "min.compaction.lag.ms",
         "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"),
        ({"remote.storage.enable": "true"}, "remote.storage.enable",
         "Tiered Storage functionality is disabled in the broker"),
    ],
)  # fmt: skip
def test_invalid_topic_configs(configs: dict[str, str | None], key: str, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        validate_topic_configs(configs)
    assert e.value.key == key
    assert message in str(e.value)
    assert e.value.code is ErrorCode.INVALID_CONFIG


def test_topic_configs_checked_against_broker_defaults() -> None:
    broker = BrokerConfig({"log.cleaner.max.compaction.lag.ms": "100"})
    assert validate_topic_configs({"min.compaction.lag.ms": "200"}) == {
        "min.compaction.lag.ms": 200
    }
    with pytest.raises(ConfigError, match=r"\(200\) > max.compaction.lag.ms \(100\)"):
        validate_topic_configs({"min.compaction.lag.ms": "200"}, broker)


def test_effective_topic_config() -> None:
    broker = BrokerConfig({"log.retention.hours": "1", "log.segment.bytes": "2097152"})
    config = effective_topic_config(broker, {"segment.bytes": "1048576"})
    assert config["segment.bytes"] == 1048576
    assert config["retention.ms"] == 3600000
    assert set(config) == set(TOPIC_CONFIGS)


def test_topic_config_sources_and_synonyms() -> None:
    broker = BrokerConfig({"log.retention.ms": "7", "log.segment.bytes": "2097152"})
    overrides = {"retention.ms": "5"}
    assert topic_config_synonyms(broker, overrides, "retention.ms") == [
        ConfigSynonym("retention.ms", "5", ConfigSource.TOPIC_CONFIG),
        ConfigSynonym("log.retention.ms", "7", ConfigSource.STATIC_BROKER_CONFIG),
        ConfigSynonym("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    ]
    assert topic_config_source(broker, overrides, "retention.ms") is ConfigSource.TOPIC_CONFIG
    assert topic_config_source(broker, {}, "segment.bytes") is ConfigSource.STATIC_BROKER_CONFIG
    assert topic_config_source(broker, {}, "max.message.bytes") is ConfigSource.DEFAULT_CONFIG
    assert topic_config_source(broker, {}, "remote.storage.enable") is ConfigSource.DEFAULT_CONFIG
    assert topic_config_synonyms(broker, {}, "remote.storage.enable") == []


# --------------------------------------------------------------------------- the tables


def test_table_sizes_and_kafka_4_topic_set() -> None:
    assert len(BROKER_CONFIGS) >= 340
    assert len(TOPIC_CONFIGS) == 37  # Kafka 4.4's LogConfig, internal.segment.bytes left out
    for removed in ("message.format.version", "message.downconversion.enable"):
        assert removed not in TOPIC_CONFIGS
    for needed in ("zookeeper.connect", "log.retention.minutes", "queued.max.requests"):
        assert needed in BROKER_CONFIGS


@pytest.mark.parametrize("key", [*BROKER_CONFIGS.values(), *TOPIC_CONFIGS.values()], ids=str)
def test_every_entry_is_consistent(key: ConfigKey) -> None:
    python_types = {
        ConfigType.BOOLEAN: bool,
        ConfigType.STRING: str,
        ConfigType.CLASS: str,
        ConfigType.INT: int,
        ConfigType.SHORT: int,
        ConfigType.LONG: int,
        ConfigType.DOUBLE: float,
        ConfigType.LIST: tuple,
    }
    if key.default is not None:
        assert isinstance(key.default, python_types[key.type])
        if key.valid is not None:
            key.valid.validate(key.name, key.default)
        # the default survives a round trip through its text form
        assert key.parse(key.to_text(key.default)) == key.default
    assert key.doc and len(key.doc) < 400
    assert isinstance(key.importance, Importance)


def test_topic_configs_are_dynamic_and_name_real_broker_synonyms() -> None:
    for key in TOPIC_CONFIGS.values():
        assert key.mode is UpdateMode.PER_TOPIC and key.dynamic
        for synonym in key.synonyms:
            assert synonym in BROKER_CONFIGS, (key.name, synonym)
    assert TOPIC_CONFIGS["retention.ms"].synonyms == (
        "log.retention.ms",
        "log.retention.minutes",
        "log.retention.hours",
    )
    assert TOPIC_CONFIGS["segment.ms"].synonyms == ("log.roll.ms", "log.roll.hours")
    assert TOPIC_CONFIGS["max.message.bytes"].synonyms == ("message.max.bytes",)
    assert TOPIC_CONFIGS["flush.ms"].synonyms == (
        "log.flush.interval.ms",
        "log.flush.scheduler.interval.ms",
    )


def test_update_modes_match_kafka() -> None:
    assert BROKER_CONFIGS["log.retention.ms"].mode is UpdateMode.CLUSTER_WIDE
    assert BROKER_CONFIGS["log.retention.hours"].mode is UpdateMode.READ_ONLY
    assert BROKER_CONFIGS["listeners"].mode is UpdateMode.PER_BROKER
    assert BROKER_CONFIGS["num.io.threads"].mode is UpdateMode.CLUSTER_WIDE
    assert not BROKER_CONFIGS["broker.id"].dynamic


def test_validators_print_kafka_valid_values() -> None:
    assert str(Range(1)) == "[1,...]"
    assert str(Range(0, 1)) == "[0,...,1]"
    assert str(Range(-131072, 22)) == "[-131072,...,22]"
    assert str(OneOf("CreateTime", "LogAppendTime")) == "[CreateTime, LogAppendTime]"
    assert str(EachOneOf("compact", "delete")) == "[compact, delete]"
    assert str(OneOf("A", "B", case_insensitive=True)) == "(case insensitive) [A, B]"
    assert str(GZIP_LEVEL) == "[1,...,9] or -1"
    assert str(TOPIC_CONFIGS["message.timestamp.type"].valid) == "[CreateTime, LogAppendTime]"


def test_a_name_defined_twice_is_refused() -> None:
    key = ConfigKey("x", ConfigType.INT, 1, Importance.LOW, doc="x")
    with pytest.raises(ValueError, match="Configuration x is defined twice"):
        index_keys([key, key])
