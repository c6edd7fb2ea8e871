"""Connection limits: what ``SocketServer.ConnectionQuotas`` decides for each new socket.

Creation-rate delays are Kafka's: 5 connections/s over 11 x 1 s windows, one connection
every 10 ms, first goes over with the 53rd (52 / 10.52 s), and Kafka 4.4's ``Rate`` with
``QuotaUtils.boundedThrottleTime`` gives 80, 270, 460, 650, 840 ms, then the one-window cap.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from kpybroker.quotas.connection_quotas import (
    ACCEPTED,
    UNLIMITED_RATE,
    ConnectionLimits,
    ConnectionQuotas,
    ListenerLimits,
    Outcome,
)
from kpybroker.quotas.entity import DEFAULT

T = 1_700_000_000_000
HOUR_MS = 3_600_000
KAFKA_DELAYS = [80, 270, 460, 650, 840, 1000, 1000, 1000]


TWO_LISTENERS = ConnectionLimits(
    listeners={"EXTERNAL": ListenerLimits(), "INTERNAL": ListenerLimits()},
    inter_broker_listener="INTERNAL",
)


def two_listeners(**limits: Any) -> ConnectionLimits:
    """An EXTERNAL listener and the inter-broker INTERNAL one, with the broker ``limits``."""
    return replace(TWO_LISTENERS, **limits)


def connect(quotas: ConnectionQuotas, listener: str, ip: str, now_ms: int = T) -> Outcome:
    """One new socket through the whole accept path, assuming the waits are done."""
    quotas.accept_delay_ms(listener, now_ms)
    assert quotas.slot_available(listener)
    return quotas.admit(listener, ip, now_ms).outcome


def test_the_per_ip_limit_refuses_at_once_and_counts_nothing() -> None:
    quotas = ConnectionQuotas(two_listeners(max_connections_per_ip=2))
    assert connect(quotas, "EXTERNAL", "10.0.0.1") is Outcome.ACCEPT
    assert connect(quotas, "INTERNAL", "10.0.0.1") is Outcome.ACCEPT
    refusal = quotas.admit("EXTERNAL", "10.0.0.1", T)
    assert (refusal.outcome, refusal.delay_ms) == (Outcome.REFUSE, 0)
    assert refusal.reason == (
        "Rejected connection from 10.0.0.1, address already has the configured maximum of "
        "2 connections."
    )
    assert (quotas.connection_count("10.0.0.1"), quotas.total_connections) == (2, 2)
    assert quotas.admit("EXTERNAL", "10.0.0.2", T) is ACCEPTED
    quotas.release("EXTERNAL", "10.0.0.1")
    assert quotas.admit("EXTERNAL", "10.0.0.1", T) is ACCEPTED


def test_per_ip_overrides_beat_the_default_and_mapped_ipv6_is_ipv4() -> None:
    limits = two_listeners(
        max_connections_per_ip=0,
        max_connections_per_ip_overrides={"10.0.0.1": 1, "2001:db8::1": 2},
    )
    quotas = ConnectionQuotas(limits)
    assert quotas.admit("EXTERNAL", "10.0.0.9", T).outcome is Outcome.REFUSE
    assert quotas.admit("EXTERNAL", "::ffff:10.0.0.1", T) is ACCEPTED
    assert quotas.admit("EXTERNAL", "10.0.0.1", T).outcome is Outcome.REFUSE
    assert quotas.connection_count("10.0.0.1") == 1
    assert quotas.admit("EXTERNAL", "2001:0db8:0000::1", T) is ACCEPTED
    assert quotas.admit("EXTERNAL", "2001:db8::1", T) is ACCEPTED


def test_the_broker_limit_blocks_all_but_the_inter_broker_listener() -> None:
    quotas = ConnectionQuotas(two_listeners(max_connections=2))
    assert connect(quotas, "EXTERNAL", "10.0.0.1") is Outcome.ACCEPT
    assert connect(quotas, "EXTERNAL", "10.0.0.2") is Outcome.ACCEPT
    assert not quotas.slot_available("EXTERNAL")  # the acceptor waits for a close
    assert connect(quotas, "INTERNAL", "10.0.0.3") is Outcome.ACCEPT  # protected
    assert quotas.excess_connections("EXTERNAL")  # close its least recent connection
    assert not quotas.excess_connections("INTERNAL")
    quotas.release("EXTERNAL", "10.0.0.1")
    assert not quotas.excess_connections("EXTERNAL")
    assert not quotas.slot_available("EXTERNAL")
    quotas.release("EXTERNAL", "10.0.0.2")
    assert quotas.slot_available("EXTERNAL")


def test_the_inter_broker_listener_is_protected_only_beside_others() -> None:
    limits = ConnectionLimits(
        listeners={"INTERNAL": ListenerLimits()},
        inter_broker_listener="INTERNAL",
        max_connections=1,
    )
    quotas = ConnectionQuotas(limits)
    assert connect(quotas, "INTERNAL", "10.0.0.1") is Outcome.ACCEPT
    assert not quotas.slot_available("INTERNAL")


def test_a_listener_limit_falls_back_to_the_broker_wide_one() -> None:
    limits = ConnectionLimits(
        listeners={"EXTERNAL": ListenerLimits(max_connections=1), "INTERNAL": ListenerLimits()},
        inter_broker_listener="INTERNAL",
        max_connections=2,
    )
    quotas = ConnectionQuotas(limits)
    assert connect(quotas, "EXTERNAL", "10.0.0.1") is Outcome.ACCEPT
    assert not quotas.slot_available("EXTERNAL")  # its own limit
    assert connect(quotas, "INTERNAL", "10.0.0.2") is Outcome.ACCEPT
    assert connect(quotas, "INTERNAL", "10.0.0.3") is Outcome.ACCEPT  # past the broker's 2
    assert not quotas.slot_available("INTERNAL")  # but not past its own 2 (the fallback)


def test_the_broker_creation_rate_delays_accepting() -> None:
    quotas = ConnectionQuotas(two_listeners(max_connection_creation_rate=5))
    delays = [quotas.accept_delay_ms("EXTERNAL", T + 10 * i) for i in range(60)]
    assert delays == [0] * 52 + KAFKA_DELAYS


def test_a_listener_creation_rate_applies_to_its_listener_only() -> None:
    limits = ConnectionLimits(
        listeners={
            "EXTERNAL": ListenerLimits(max_connection_creation_rate=5),
            "OTHER": ListenerLimits(),
        },
    )
    quotas = ConnectionQuotas(limits)
    assert [quotas.accept_delay_ms("EXTERNAL", T + 10 * i) for i in range(60)][52:] == (
        KAFKA_DELAYS
    )
    assert quotas.accept_delay_ms("OTHER", T + 600) == 0


def test_the_protected_listener_does_not_count_towards_the_broker_rate() -> None:
    quotas = ConnectionQuotas(
        ConnectionLimits(
            listeners={
                "EXTERNAL": ListenerLimits(),
                "INTERNAL": ListenerLimits(max_connection_creation_rate=UNLIMITED_RATE),
            },
            inter_broker_listener="INTERNAL",
            max_connection_creation_rate=5,
        )
    )
    for i in range(100):
        assert quotas.accept_delay_ms("INTERNAL", T + i) == 0
    assert quotas.accept_delay_ms("EXTERNAL", T + 100) == 0


def test_the_ip_creation_rate_refuses_late_and_takes_the_connection_back() -> None:
    quotas = ConnectionQuotas(two_listeners(max_connection_creation_rate=6))
    quotas.update_ip_connection_rate(DEFAULT, 5)
    outcomes = [connect(quotas, "EXTERNAL", "10.0.0.1", T + 10 * i) for i in range(52)]
    assert set(outcomes) == {Outcome.ACCEPT}
    quotas.accept_delay_ms("EXTERNAL", T + 520)
    throttled = quotas.admit("EXTERNAL", "10.0.0.1", T + 520)
    assert (throttled.outcome, throttled.delay_ms) == (Outcome.THROTTLE, 80)
    assert throttled.reason == "Delaying closing of connection from 10.0.0.1 for 80 ms"
    assert quotas.connection_count("10.0.0.1") == 52
    for _ in range(20):  # a client reconnecting in a loop: refused, and not counted...
        assert quotas.accept_delay_ms("EXTERNAL", T + 520) == 0
        assert quotas.admit("EXTERNAL", "10.0.0.1", T + 520).outcome is Outcome.THROTTLE
    # ... in the broker's rate either: 53 / 10.52 s is still under 6/s.
    assert quotas.accept_delay_ms("EXTERNAL", T + 520) == 0
    assert quotas.admit("EXTERNAL", "10.0.0.2", T + 520) is ACCEPTED


def test_ip_rate_quotas_per_ip_and_default() -> None:
    quotas = ConnectionQuotas(two_listeners())
    quotas.update_ip_connection_rate(DEFAULT, 5)
    quotas.update_ip_connection_rate("10.0.0.1", 100)
    assert quotas.connection_rate_for_ip("::ffff:10.0.0.1") == 100
    assert quotas.connection_rate_for_ip("10.0.0.2") == 5
    quotas.update_ip_connection_rate("10.0.0.1", None)
    quotas.update_ip_connection_rate(DEFAULT, None)
    assert quotas.connection_rate_for_ip("10.0.0.1") == UNLIMITED_RATE
    with pytest.raises(ValueError):
        quotas.update_ip_connection_rate("broker.example.com", 5)


def test_ip_rates_expire_after_an_idle_hour() -> None:
    quotas = ConnectionQuotas(two_listeners())
    quotas.update_ip_connection_rate(DEFAULT, 5)
    for i in range(52):
        assert quotas.admit("EXTERNAL", "10.0.0.1", T + 10 * i) is ACCEPTED
    assert quotas.admit("EXTERNAL", "10.0.0.1", T + 520).outcome is Outcome.THROTTLE
    assert quotas.admit("EXTERNAL", "10.0.0.2", T + 600) is ACCEPTED
    assert quotas.metered_addresses == 2
    assert quotas.admit("EXTERNAL", "10.0.0.3", T + 520 + HOUR_MS + 1) is ACCEPTED
    assert quotas.metered_addresses == 2  # 10.0.0.1 forgotten
    assert quotas.admit("EXTERNAL", "10.0.0.3", T + 600 + HOUR_MS + 1) is ACCEPTED
    assert quotas.metered_addresses == 1


def test_releasing_an_unknown_address_is_a_bug() -> None:
    quotas = ConnectionQuotas(two_listeners())
    with pytest.raises(ValueError, match=r"address with no connections, address: 10\.0\.0\.1"):
        quotas.release("EXTERNAL", "10.0.0.1")


def test_reconfigure_keeps_counts_and_applies_new_limits() -> None:
    quotas = ConnectionQuotas(two_listeners())
    for i in range(3):
        assert connect(quotas, "EXTERNAL", f"10.0.0.{i}") is Outcome.ACCEPT
    quotas.reconfigure(two_listeners(max_connections=2))
    assert quotas.excess_connections("EXTERNAL")
    assert not quotas.slot_available("EXTERNAL")
    single = ConnectionLimits(listeners={"INTERNAL": ListenerLimits()}, max_connections=10)
    quotas.reconfigure(single)  # EXTERNAL removed: its connections still count
    assert quotas.total_connections == 3
    quotas.release("EXTERNAL", "10.0.0.0")
    assert quotas.total_connections == 2
    with pytest.raises(KeyError):
        quotas.accept_delay_ms("EXTERNAL", T)
