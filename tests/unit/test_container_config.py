"""The container entrypoint's mapping of KAFKA_* variables to server.properties."""

from __future__ import annotations

import stat

import pytest

from kpybroker.config import BrokerConfig, format_properties, parse_properties, read_properties
from kpybroker.tools.container_config import (
    DEFAULT_LISTENERS,
    ContainerConfigError,
    broker_command,
    config_name,
    log_level,
    main,
    properties_from_environment,
    variable_name,
    write_properties,
)


@pytest.mark.parametrize(
    ("variable", "name"),
    [
        ("KAFKA_BROKER_ID", "broker.id"),
        ("KAFKA_ADVERTISED_LISTENERS", "advertised.listeners"),
        ("KAFKA_LISTENER_SECURITY_PROTOCOL_MAP", "listener.security.protocol.map"),
        ("KAFKA_ZOOKEEPER_CONNECT", "zookeeper.connect"),
        ("KAFKA_LOG_DIRS", "log.dirs"),
        ("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "offsets.topic.replication.factor"),
        # cp-kafka's examples: two underscores are one, three a dash.
        ("KAFKA_WITH__UNDERSCORE", "with_underscore"),
        ("KAFKA_WITH___DASH", "with-dash"),
        (
            "KAFKA_LISTENER_NAME_SASL__SSL_SCRAM___SHA___256_SASL_JAAS_CONFIG",
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config",
        ),
    ],
)
def test_variable_names_map_as_in_the_kafka_images(variable: str, name: str) -> None:
    assert config_name(variable) == name
    assert variable_name(name) == variable


def test_the_environment_becomes_properties_the_broker_accepts() -> None:
    environ = {
        "KAFKA_BROKER_ID": "2",
        "KAFKA_LISTENERS": "INTERNAL://0.0.0.0:29092,EXTERNAL://0.0.0.0:9092",
        "KAFKA_ADVERTISED_LISTENERS": "INTERNAL://kafka2:29092,EXTERNAL://localhost:9094",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
        "KAFKA_INTER_BROKER_LISTENER_NAME": "INTERNAL",
        "KAFKA_ZOOKEEPER_CONNECT": "zookeeper:2181/kpybroker",
        "KAFKA_DEFAULT_REPLICATION_FACTOR": "3",
        "KAFKA_HEAP_OPTS": "-Xmx1G",  # for a JVM: ignored
        "PATH": "/usr/bin",  # not KAFKA_: ignored
    }
    props = properties_from_environment(environ)
    assert props == {
        "advertised.listeners": "INTERNAL://kafka2:29092,EXTERNAL://localhost:9094",
        "broker.id": "2",
        "default.replication.factor": "3",
        "inter.broker.listener.name": "INTERNAL",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
        "listeners": "INTERNAL://0.0.0.0:29092,EXTERNAL://0.0.0.0:9092",
        "zookeeper.connect": "zookeeper:2181/kpybroker",
    }
    config = BrokerConfig(props)
    assert config["default.replication.factor"] == 3
    assert config.inter_broker_listener_name() == "INTERNAL"


def test_listeners_default_to_the_advertised_ones_on_every_interface() -> None:
    props = properties_from_environment(
        {"KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://broker1:9092,SSL://broker1.example:9093"}
    )
    assert props["listeners"] == "PLAINTEXT://0.0.0.0:9092,SSL://0.0.0.0:9093"
    assert properties_from_environment({})["listeners"] == DEFAULT_LISTENERS
    # An empty host: every interface, advertising this machine's name (as Kafka does).
    assert BrokerConfig({"listeners": DEFAULT_LISTENERS}).listeners()[0].host == ""


def test_an_unknown_variable_stops_the_container_naming_it() -> None:
    with pytest.raises(ContainerConfigError) as caught:
        properties_from_environment({"KAFKA_NUM_PARTITION": "3"})
    assert str(caught.value).startswith(
        "KAFKA_NUM_PARTITION sets num.partition, which is not a broker config kpybroker knows"
    )


def test_a_per_listener_config_is_known() -> None:
    props = properties_from_environment(
        {"KAFKA_LISTENER_NAME_PLAINTEXT_CONNECTIONS_MAX_REAUTH_MS": "1000"}
    )
    assert props["listener.name.plaintext.connections.max.reauth.ms"] == "1000"


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        (
            {"KAFKA_NUM_PARTITIONS": "three"},
            "KAFKA_NUM_PARTITIONS: Invalid value three for configuration num.partitions",
        ),
        (
            {"KAFKA_LISTENERS": "PLAINTEXT://0.0.0.0:9092"},
            "KAFKA_ADVERTISED_LISTENERS [(]unset[)]: advertised.listeners cannot use the "
            "nonroutable meta-address 0.0.0.0",
        ),
        (
            {"KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://broker:9092:x"},
            "listeners [(]derived from KAFKA_ADVERTISED_LISTENERS[)]: Error creating broker "
            "listeners from 'PLAINTEXT://0.0.0.0:9092:x'",
        ),
    ],
)
def test_a_bad_value_is_refused_by_the_brokers_own_checks(
    environ: dict[str, str], message: str
) -> None:
    with pytest.raises(ContainerConfigError, match="^" + message):
        properties_from_environment(environ)


def test_the_log4j_root_level_sets_the_brokers_log_level() -> None:
    assert log_level({}) is None
    assert log_level({"KAFKA_LOG4J_ROOT_LOGLEVEL": "WARN"}) == "WARNING"
    assert log_level({"KAFKA_LOG4J_ROOT_LOGLEVEL": "debug"}) == "DEBUG"
    with pytest.raises(ContainerConfigError, match="KAFKA_LOG4J_ROOT_LOGLEVEL=LOUD"):
        log_level({"KAFKA_LOG4J_ROOT_LOGLEVEL": "LOUD"})


def test_written_properties_read_back_exactly(tmp_path) -> None:
    props = {
        "listeners": "PLAINTEXT://:9092",
        "sasl.jaas.config": 'org.x.PlainLoginModule required username="a b" password="p=#!:\\";',
        "odd key": " leading space\tand tab\nand newline",
        "#=:! key": "=value: #!",
    }
    assert parse_properties(format_properties(props)) == props
    path = tmp_path / "etc" / "server.properties"
    write_properties(path, props)
    assert read_properties(path) == props
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_the_broker_runs_on_the_file_with_the_same_interpreter(tmp_path) -> None:
    import sys

    command = broker_command(tmp_path / "s.properties", "DEBUG", ["--override", "a=b"])
    assert command == [
        sys.executable,
        "-m",
        "kpybroker",
        str(tmp_path / "s.properties"),
        "--log-level",
        "DEBUG",
        "--override",
        "a=b",
    ]


def test_print_shows_the_properties_and_errors_exit_2(capsys) -> None:
    assert main(["--print"], {"KAFKA_NUM_PARTITIONS": "3"}) == 0
    assert capsys.readouterr().out == "num.partitions=3\nlisteners=PLAINTEXT://:9092\n"
    assert main(["--print"], {"KAFKA_NO_SUCH_THING": "1"}) == 2
    assert capsys.readouterr().err.startswith(
        "kpybroker-container: KAFKA_NO_SUCH_THING sets no.such.thing"
    )


def test_the_health_check_fails_without_a_broker(tmp_path) -> None:
    assert main(["--check", "--properties-file", str(tmp_path / "missing")]) == 1
