"""Connection limits, as Kafka's ``SocketServer.ConnectionQuotas`` enforces them.

Four limits, each with its own remedy in Kafka:

* ``max.connections`` (broker-wide) and ``listener.name.<l>.max.connections`` (a listener;
  unset, it is the broker-wide value): the listener stops accepting until a connection
  closes. The inter-broker listener is exempt from the broker-wide limit (not from its
  own) when there is more than one listener; connections it adds beyond the broker-wide
  limit make the other listeners close their least recently active connections.
* ``max.connection.creation.rate`` (broker-wide, all listeners but the protected
  inter-broker one) and ``listener.name.<l>.max.connection.creation.rate`` (a listener;
  unset, the broker-wide value): the listener stops accepting for the throttle time, at
  most one quota window, then admits the connection.
* ``connection_creation_rate`` of an ``ip`` entity, or of the default ``<default>`` ip
  (KIP-612): the connection is refused; its socket is held open, unserved, for the throttle
  time and then closed, so a client reconnecting in a loop is slowed down.
* ``max.connections.per.ip``, ``max.connections.per.ip.overrides``: the connection is
  refused and closed at once.

The network layer drives the accept path in Kafka's order (its acceptor handles one new
socket at a time per listener):

1. ``accept_delay_ms(listener, now_ms)`` as soon as a socket is accepted: it records the
   connection against the broker and listener creation rates and returns a delay D.
2. Accept nothing more on that listener, and hold the socket, until D ms have passed *and*
   ``slot_available(listener)`` is true; re-check that after every ``release`` (and after a
   limit is raised by ``reconfigure``).
3. ``admit(listener, ip, now_ms)``: ``Admission.ACCEPT`` (counted; serve it),
   ``REFUSE`` (close now) or ``THROTTLE`` (not counted; close after ``delay_ms``).
4. ``release(listener, ip)`` when an admitted connection closes, however it closes.
5. While ``excess_connections(listener)`` is true, close that listener's least recently
   active connection (Kafka's processors check this on every poll).

Time is a monotonic clock in integer milliseconds (``now_ms``), passed in by the caller.
IP addresses are text; IPv4-mapped IPv6 addresses count as the IPv4 address, as in Java.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from kpybroker.quotas.client_quota_manager import INT_MAX
from kpybroker.quotas.entity import DEFAULT, DefaultEntity
from kpybroker.quotas.expiring_sensors import SENSOR_EXPIRY_MS, ExpiringSensors
from kpybroker.quotas.sampled_rate import QuotaWindow, SampledRate, throttle_time_ms

#: ``QuotaConfig.IP_CONNECTION_RATE_DEFAULT``: a per-IP rate of this value is no quota.
UNLIMITED_RATE = INT_MAX


@dataclass(frozen=True, slots=True)
class ListenerLimits:
    """A listener's own limits: ``listener.name.<l>.max.connections`` and
    ``...max.connection.creation.rate``; None falls back to the broker-wide value."""

    max_connections: int | None = None
    max_connection_creation_rate: int | None = None


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """Every connection limit of the broker's config, resolved.

    ``max_connections_per_ip_overrides`` is keyed by IP literal: Kafka resolves host names
    there (``InetAddress.getByName``) when the config is loaded, and so must the caller.
    ``listeners`` names every listener the broker serves, as in ``listeners``.
    """

    listeners: Mapping[str, ListenerLimits] = field(default_factory=dict)
    inter_broker_listener: str | None = None
    max_connections: int = INT_MAX
    max_connections_per_ip: int = INT_MAX
    max_connections_per_ip_overrides: Mapping[str, int] = field(default_factory=dict)
    max_connection_creation_rate: int = INT_MAX


class Outcome(Enum):
    ACCEPT = "accept"
    REFUSE = "refuse"
    THROTTLE = "throttle"


@dataclass(frozen=True, slots=True)
class Admission:
    """What to do with an accepted socket: serve it, close it now, or close it after
    ``delay_ms``; ``reason`` is the line Kafka logs for a refusal."""

    outcome: Outcome
    delay_ms: int = 0
    reason: str = ""


ACCEPTED = Admission(Outcome.ACCEPT)


class _Listener:
    __slots__ = ("connections", "limits", "rate")

    def __init__(self, limits: ListenerLimits, window: QuotaWindow) -> None:
        self.limits = limits
        self.rate = SampledRate(window)
        self.connections = 0


def ip_key(ip: str) -> str:
    """The canonical text of an IP address, the key of every per-IP count and quota."""
    address = ipaddress.ip_address(ip)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return str(address)


class ConnectionQuotas:
    """Connection counts and creation rates of a broker, and the admission decisions."""

    def __init__(
        self,
        limits: ConnectionLimits,
        window: QuotaWindow | None = None,
        *,
        ip_sensor_expiry_ms: int = SENSOR_EXPIRY_MS,
    ) -> None:
        self.window = window or QuotaWindow()
        # Kafka caps connection-rate delays at one window (quota.window.size.seconds).
        self._max_throttle_ms = self.window.window_ms
        self._limits = ConnectionLimits()
        self._per_ip_overrides: dict[str, int] = {}
        self._listeners: dict[str, _Listener] = {}
        self._counts: dict[str, int] = {}
        self._total = 0
        self._broker_rate = SampledRate(self.window)
        self._default_ip_rate = UNLIMITED_RATE
        self._ip_rate_quotas: dict[str, int] = {}
        rate_window = self.window
        self._ip_rates: ExpiringSensors[str, SampledRate] = ExpiringSensors(
            lambda: SampledRate(rate_window), expiry_ms=ip_sensor_expiry_ms
        )
        self.reconfigure(limits)

    # ------------------------------------------------------------------ configuration

    def reconfigure(self, limits: ConnectionLimits) -> None:
        """Apply a new set of limits (a dynamic config change, or listeners added or
        removed). Counts and measured rates carry over; a removed listener's connections
        still count towards the broker and their addresses until released."""
        self._limits = limits
        self._per_ip_overrides = {
            ip_key(ip): count for ip, count in limits.max_connections_per_ip_overrides.items()
        }
        for name in self._listeners.keys() - limits.listeners.keys():
            del self._listeners[name]
        for name, listener_limits in limits.listeners.items():
            listener = self._listeners.get(name)
            if listener is None:
                self._listeners[name] = _Listener(listener_limits, self.window)
            else:
                listener.limits = listener_limits

    def update_ip_connection_rate(self, ip: str | DefaultEntity, rate: int | None) -> None:
        """Set the ``connection_creation_rate`` of an ``ip`` entity (``DEFAULT``: any IP
        without its own), or remove it with None."""
        if ip is DEFAULT:
            self._default_ip_rate = UNLIMITED_RATE if rate is None else rate
        elif rate is None:
            self._ip_rate_quotas.pop(ip_key(ip), None)
        else:
            self._ip_rate_quotas[ip_key(ip)] = rate

    def connection_rate_for_ip(self, ip: str) -> int:
        """The connection creation rate quota of ``ip`` (``UNLIMITED_RATE``: none)."""
        return self._ip_rate_quotas.get(ip_key(ip), self._default_ip_rate)

    def connection_count(self, ip: str) -> int:
        return self._counts.get(ip_key(ip), 0)

    @property
    def total_connections(self) -> int:
        return self._total

    @property
    def metered_addresses(self) -> int:
        """How many per-IP creation rates are kept (each expires after an idle hour)."""
        return len(self._ip_rates)

    # ------------------------------------------------------------------ the accept path

    def accept_delay_ms(self, listener: str, now_ms: int) -> int:
        """Record a new connection on ``listener`` against the broker-wide and listener
        creation rates; how long the listener must wait before admitting it (0: no wait)."""
        state = self._listeners[listener]
        broker_rate = self._limits.max_connection_creation_rate
        delay_ms = 0
        if not self._protected(listener):
            delay_ms = self._record(self._broker_rate, broker_rate, now_ms)
        rate = state.limits.max_connection_creation_rate
        listener_rate = broker_rate if rate is None else rate
        return max(delay_ms, self._record(state.rate, listener_rate, now_ms))

    def slot_available(self, listener: str) -> bool:
        """Whether ``listener`` may admit one more connection under the count limits."""
        state = self._listeners[listener]
        limit = state.limits.max_connections
        if limit is None:
            limit = self._limits.max_connections
        if state.connections >= limit:
            return False
        return self._protected(listener) or self._total < self._limits.max_connections

    def admit(self, listener: str, ip: str, now_ms: int) -> Admission:
        """Decide on a connection from ``ip``, once ``accept_delay_ms`` has been waited out
        and a slot is available; an ``ACCEPT`` counts the connection."""
        state = self._listeners[listener]
        address = ip_key(ip)
        rate_quota = self._ip_rate_quotas.get(address, self._default_ip_rate)
        if rate_quota != UNLIMITED_RATE:
            ip_rate = self._ip_rates.use(address, now_ms)
            throttle_ms = self._record(ip_rate, rate_quota, now_ms)
            if throttle_ms > 0:
                # Refused: take the connection back from every rate it was counted in.
                ip_rate.record(-1.0, now_ms)
                if not self._protected(listener):
                    self._broker_rate.record(-1.0, now_ms)
                state.rate.record(-1.0, now_ms)
                return Admission(
                    Outcome.THROTTLE,
                    throttle_ms,
                    f"Delaying closing of connection from {address} for {throttle_ms} ms",
                )
        count = self._counts.get(address, 0)
        limit = self._per_ip_overrides.get(address, self._limits.max_connections_per_ip)
        if count >= limit:
            return Admission(
                Outcome.REFUSE,
                0,
                f"Rejected connection from {address}, address already has the configured "
                f"maximum of {limit} connections.",
            )
        self._counts[address] = count + 1
        self._total += 1
        state.connections += 1
        return ACCEPTED

    def release(self, listener: str, ip: str) -> None:
        """An admitted connection from ``ip`` on ``listener`` has closed."""
        address = ip_key(ip)
        count = self._counts.get(address)
        if count is None:
            raise ValueError(
                "Attempted to decrease connection count for address with no connections, "
                f"address: {address}"
            )
        if count == 1:
            del self._counts[address]
        else:
            self._counts[address] = count - 1
        self._total -= 1
        state = self._listeners.get(listener)
        if state is not None and state.connections > 0:
            state.connections -= 1

    def excess_connections(self, listener: str) -> bool:
        """Whether ``listener`` must close its least recently active connection: the broker
        holds more than ``max.connections`` (the protected listener never closes any)."""
        return self._total > self._limits.max_connections and not self._protected(listener)

    # ------------------------------------------------------------------ internals

    def _protected(self, listener: str) -> bool:
        return listener == self._limits.inter_broker_listener and len(self._listeners) > 1

    def _record(self, rate: SampledRate, bound: int, now_ms: int) -> int:
        """Count one connection in ``rate``; the delay before ``bound`` holds again."""
        rate.record(1.0, now_ms)
        measured = rate.measure(now_ms)
        if measured <= bound:
            return 0
        throttle_ms = throttle_time_ms(measured, bound, rate.window_size_ms(now_ms))
        return min(throttle_ms, self._max_throttle_ms)
