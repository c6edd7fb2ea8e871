"""Broker loggers (the BROKER_LOGGER config resource): ``kafka-configs.sh --entity-type
broker-loggers`` lists this broker's Python loggers with their levels and changes them at run
time, and the wire's refusals are Kafka's (the differential suite's ``broker_loggers``
scenario compares them with Kafka 4.4)."""

from __future__ import annotations

import pytest

from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages.alter_configs import (
    AlterableConfig as LegacyConfig,
)
from kpybroker.protocol.messages.alter_configs import (
    AlterConfigsRequest,
    AlterConfigsResource,
)
from kpybroker.protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from kpybroker.protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    IncrementalAlterConfigsRequest,
)
from kpybroker.protocol.messages.incremental_alter_configs import (
    AlterConfigsResource as IncrementalResource,
)
from tests.helpers.brokers import ManagedBroker
from tests.helpers.groups_wire import Wire
from tests.helpers.process import ToolResult, ToolRunner

pytestmark = pytest.mark.timeout(240)

BROKER_LOGGER = 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def configs(java_tool: ToolRunner, broker: ManagedBroker, *args: str) -> ToolResult:
    return java_tool(
        "org.apache.kafka.tools.ConfigCommand",
        "--bootstrap-server",
        broker.bootstrap,
        "--entity-type",
        "broker-loggers",
        "--entity-name",
        "0",
        *args,
    )


def levels(java_tool: ToolRunner, broker: ManagedBroker) -> dict[str, str]:
    """The loggers ``kafka-configs.sh --describe`` lists, and their levels."""
    lines = configs(java_tool, broker, "--describe").check().stdout.splitlines()
    assert lines[0] == "Dynamic configs for broker-logger 0 are:", lines
    described = {}
    for line in lines[1:]:
        setting, sensitive, synonyms = line.strip().split(" ")
        assert (sensitive, synonyms) == ("sensitive=false", "synonyms={}"), line
        name, level = setting.split("=")
        described[name] = level
    return described


def change(wire: Wire, name: str, *ops: tuple[str, int, str | None], validate_only: bool = False):
    """One IncrementalAlterConfigs of the BROKER_LOGGER resource ``name``: its (code, message)."""
    request = IncrementalAlterConfigsRequest(
        resources=[
            IncrementalResource(
                resource_type=BROKER_LOGGER,
                resource_name=name,
                configs=[AlterableConfig(key, op, value) for key, op, value in ops],
            )
        ],
        validate_only=validate_only,
    )
    (answer,) = wire.call(request, 1).responses
    return answer.error_code, answer.error_message


def describe(wire: Wire, name: str, keys: list[str] | None = None):
    request = DescribeConfigsRequest(
        resources=[DescribeConfigsResource(BROKER_LOGGER, name, keys)],
        include_synonyms=True,
        include_documentation=True,
    )
    (result,) = wire.call(request, 4).results
    return result


def test_kafka_configs_lists_and_changes_the_loggers(
    module_broker: ManagedBroker, java_tool: ToolRunner
) -> None:
    before = levels(java_tool, module_broker)
    # The command line's --log-level (INFO) on root, inherited by every module's logger.
    assert before["root"] == "INFO"
    assert before["kpybroker"] == "INFO"
    assert before["kpybroker.broker"] == "INFO"

    configs(java_tool, module_broker, "--alter", "--add-config", "kpybroker=DEBUG").check()
    after = levels(java_tool, module_broker)
    assert after["kpybroker"] == "DEBUG"
    assert after["kpybroker.broker"] == "DEBUG"  # no level of its own: it inherits
    assert after["root"] == "INFO"

    configs(java_tool, module_broker, "--alter", "--delete-config", "kpybroker").check()
    assert levels(java_tool, module_broker) == {**after, **before}

    refused = configs(java_tool, module_broker, "--alter", "--add-config", "no.such.logger=WARN")
    assert "Invalid broker logger(s): no.such.logger" in refused.stdout + refused.stderr, (
        refused.describe()
    )


def test_a_change_is_checked_whole_before_any_of_it_applies(module_broker: ManagedBroker) -> None:
    with Wire(module_broker.bootstrap) as wire:
        code, message = change(wire, "0", ("kpybroker", SET, "WARN"), ("root", DELETE, None))
        assert code == ErrorCode.INVALID_REQUEST
        assert message == "Removing the log level of the root logger is not allowed"
        assert describe(wire, "0", ["kpybroker"]).configs[0].value == "INFO"

        assert change(wire, "0", ("root", SET, "DEBUG"), validate_only=True) == (0, None)
        assert describe(wire, "0", ["root"]).configs[0].value == "INFO"

        assert change(wire, "0", ("root", SET, "WARN")) == (0, None)
        assert describe(wire, "0", ["root", "kpybroker.cli"]).configs[0].value == "WARN"
        assert change(wire, "0", ("root", SET, "INFO")) == (0, None)


@pytest.mark.parametrize(
    ("name", "ops", "expected"),
    [
        (
            "0",
            [("no.such.logger", SET, "INFO")],
            (ErrorCode.INVALID_CONFIG, "Logger no.such.logger does not exist!"),
        ),
        (
            "0",
            [("root", SET, "debug")],
            (
                ErrorCode.INVALID_CONFIG,
                "Cannot set the log level of root to debug as it is not a supported log level."
                " Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN",
            ),
        ),
        (
            "0",
            [("no.such.logger", DELETE, None)],
            (ErrorCode.INVALID_CONFIG, "Logger no.such.logger does not exist!"),
        ),
        (
            "0",
            [("root", APPEND, "INFO")],
            (
                ErrorCode.INVALID_REQUEST,
                "APPEND operation is not allowed for the BROKER_LOGGER resource",
            ),
        ),
        (
            "0",
            [("root", SUBTRACT, "INFO")],
            (
                ErrorCode.INVALID_REQUEST,
                "SUBTRACT operation is not allowed for the BROKER_LOGGER resource",
            ),
        ),
        (
            "0",
            [("root", 7, "INFO")],
            (
                ErrorCode.INVALID_REQUEST,
                "Unknown operation type 7 is not allowed for the BROKER_LOGGER resource",
            ),
        ),
        (
            "",
            [("root", SET, "INFO")],
            (ErrorCode.INVALID_REQUEST, "Node id must be an integer, but it is: "),
        ),
        (
            "+5",
            [("root", SET, "INFO")],
            (ErrorCode.INVALID_REQUEST, "Unexpected node id. Expected 0, but received 5"),
        ),
        (
            "0",
            [("root", SET, None)],
            (ErrorCode.INVALID_REQUEST, "Null value not supported for : root"),
        ),
    ],
)
def test_refused_changes_get_kafkas_errors(
    module_broker: ManagedBroker,
    name: str,
    ops: list[tuple[str, int, str | None]],
    expected: tuple[ErrorCode, str],
) -> None:
    with Wire(module_broker.bootstrap) as wire:
        assert change(wire, name, *ops) == expected


def test_describe_and_the_legacy_alter(module_broker: ManagedBroker) -> None:
    with Wire(module_broker.bootstrap) as wire:
        root = describe(wire, "0", ["root", "no.such.logger"])
        assert (root.error_code, root.error_message) == (0, "")
        (entry,) = root.configs
        assert (entry.name, entry.value, entry.config_source, entry.read_only) == (
            "root",
            "INFO",
            6,
            False,
        )
        assert (entry.synonyms, entry.config_type, entry.documentation) == ([], 0, "")
        for name, message in [
            ("", "Broker id must not be empty"),
            ("x", "Broker id must be an integer, but it is: x"),
            ("5", "Unexpected broker id, expected 0 but received 5"),
        ]:
            refused = describe(wire, name)
            assert (refused.error_code, refused.error_message) == (42, message)
            assert refused.configs == []

        legacy = AlterConfigsRequest(
            resources=[AlterConfigsResource(BROKER_LOGGER, "0", [LegacyConfig("root", "DEBUG")])]
        )
        (answer,) = wire.call(legacy, 2).responses
        assert (answer.error_code, answer.error_message) == (42, "Unknown resource type 8")
