"""``max.connections.per.ip.overrides`` parsing and checks, with Kafka's error texts.

The texts are those of Kafka 4.4 on Java 17: ``Csv.parseCsvMap`` failing on an entry
without a colon (wrapped by ``KafkaConfig.getMap``), ``Integer.parseInt``'s
``NumberFormatException``, and ``KafkaConfig.validateValues``.
"""

from __future__ import annotations

import pytest

from kpybroker.config.core import ConfigError
from kpybroker.protocol.errors import ErrorCode
from kpybroker.quotas.per_ip_overrides import (
    check_per_ip_limits,
    parse_max_connections_per_ip_overrides,
)

KEY = "max.connections.per.ip.overrides"


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("", {}),
        (",", {}),
        ("1.2.3.4:5, ::1:7 ,1.2.3.4:6", {"1.2.3.4": 6, "::1": 7}),  # last colon; last wins
        ("host.example.com : +3,", {"host.example.com": 3}),
        ("\tother:-1", {"other": -1}),
    ],
)
def test_parse(value: str, parsed: dict[str, int]) -> None:
    assert parse_max_connections_per_ip_overrides(value) == parsed


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("abc", f"Error parsing configuration property '{KEY}': begin 0, end -1, length 3"),
        (",a:1", f"Error parsing configuration property '{KEY}': begin 0, end -1, length 0"),
        (" ", f"Error parsing configuration property '{KEY}': begin 0, end -1, length 1"),
        ("a:x", 'For input string: "x"'),
        ("a:", 'For input string: ""'),
        ("a:2147483648", 'For input string: "2147483648"'),
        ("a:1_0", 'For input string: "1_0"'),
    ],
)
def test_parse_errors(value: str, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_max_connections_per_ip_overrides(value)
    assert (error.value.key, error.value.message) == (KEY, message)
    assert error.value.code == ErrorCode.INVALID_CONFIG


def test_zero_per_ip_needs_overrides() -> None:
    check_per_ip_limits(0, {"1.2.3.4": 1})
    with pytest.raises(ConfigError) as error:
        check_per_ip_limits(0, {})
    assert error.value.message == (
        "requirement failed: max.connections.per.ip can be set to zero only if "
        "max.connections.per.ip.overrides property is set."
    )


def test_hosts_must_have_valid_characters() -> None:
    check_per_ip_limits(10, {"fe80::1%eth0": 1, "my-host_1.example": 2})
    with pytest.raises(ConfigError) as error:
        check_per_ip_limits(10, {"ok": 1, "bad host": 2, "x/y": 3})
    assert error.value.message == f"{KEY} contains invalid addresses : bad host,x/y"
