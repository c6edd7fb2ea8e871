"""This process's loggers as Kafka's BROKER_LOGGER resource (``config/broker_loggers.py``)."""

from __future__ import annotations

import logging

import pytest

from kpybroker.config import broker_loggers
from kpybroker.protocol.errors import ErrorCode, KafkaError


@pytest.mark.parametrize(
    ("level", "name"),
    [(0, "ALL"), (1, "TRACE"), (5, "TRACE"), (10, "DEBUG"), (15, "INFO"), (20, "INFO"),
     (30, "WARN"), (40, "ERROR"), (50, "FATAL"), (51, "OFF")],
)  # fmt: skip
def test_python_levels_are_described_under_log4j_names(level: int, name: str) -> None:
    assert broker_loggers.level_name(level) == name


def test_a_set_level_applies_to_the_logger_and_its_children_until_unset() -> None:
    parent = logging.getLogger("kpybroker-test-parent")
    child = logging.getLogger("kpybroker-test-parent.child")
    try:
        broker_loggers.check_set(parent.name, "TRACE")
        broker_loggers.set_level(parent.name, "TRACE")
        assert child.isEnabledFor(5)
        assert broker_loggers.loggers()[child.name] == "TRACE"

        broker_loggers.check_unset(parent.name)
        broker_loggers.unset_level(parent.name)
        assert parent.level == logging.NOTSET
        root = logging.getLogger().getEffectiveLevel()
        assert broker_loggers.loggers()[child.name] == broker_loggers.level_name(root)
    finally:
        parent.setLevel(logging.NOTSET)


def test_only_existing_loggers_change_and_root_keeps_a_level() -> None:
    logging.getLogger("kpybroker-test-only.leaf")  # its parent is a placeholder, not a logger
    with pytest.raises(KafkaError) as unknown:
        broker_loggers.check_set("kpybroker-test-only", "INFO")
    assert unknown.value.code == ErrorCode.INVALID_CONFIG
    with pytest.raises(KafkaError) as root:
        broker_loggers.check_unset("root")
    assert root.value.code == ErrorCode.INVALID_REQUEST
    assert "root" in broker_loggers.loggers()
