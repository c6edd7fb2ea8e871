"""The broker's configuration: typed values, the rules Kafka checks at start, and provenance.

A ``BrokerConfig`` holds three layers of raw text, as Kafka does: the static config
(server.properties plus ``--override``), then the dynamic cluster-wide defaults, then the
dynamic per-broker values; the highest layer holding a key wins, and the table default
applies otherwise. Keeping the layers (rather than only the merged values) is what lets
DescribeConfigs report each value's source and synonyms the way Kafka does.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import socket
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from kpybroker.config.broker_table import BROKER_CONFIGS
from kpybroker.config.core import (
    HOUR_MS,
    MINUTE_MS,
    ConfigError,
    ConfigSource,
    UpdateMode,
    parse_list,
)
from kpybroker.config.properties import parse_override, read_properties
from kpybroker.config.topic_table import TOPIC_CONFIGS
from kpybroker.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

# Keys Kafka reads by prefix rather than by name: per-listener overrides such as
# listener.name.internal.ssl.keystore.location. They are kept, and not warned about.
_PREFIXED_KEYS = ("listener.name.",)

_LISTENER = re.compile(r"(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)")

# Kafka's DynamicBrokerConfig.brokerConfigSynonyms: broker configs that stand for one
# another, highest precedence first.
_BROKER_SYNONYMS = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)


# Per-listener SASL configs are given per mechanism: listener.name.NAME.MECHANISM.config.
_MECHANISM_CONFIGS = (
    "sasl.jaas.config",
    "sasl.login.class",
    "sasl.login.callback.handler.class",
    "sasl.server.callback.handler.class",
)


class Listener(NamedTuple):
    """One listener endpoint. ``host`` "" means every interface; ``port`` 0 means any free port."""

    name: str
    host: str
    port: int
    security_protocol: str

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


class ConfigSynonym(NamedTuple):
    """One entry of DescribeConfigs' synonyms list; ``value`` is None for a sensitive config."""

    name: str
    value: str | None
    source: ConfigSource


def broker_config_synonyms(name: str) -> tuple[str, ...]:
    """The broker configs that stand for ``name``, itself included, highest precedence first.

    As Kafka's ``brokerConfigSynonyms``: log.flush.interval.ms falls back to
    log.flush.scheduler.interval.ms (but not the other way round), and a per-listener
    override listener.name.NAME.x has x as its synonym.
    """
    for group in _BROKER_SYNONYMS:
        if name in group:
            return group
    if name == "log.flush.interval.ms":
        return (name, "log.flush.scheduler.interval.ms")
    if name.startswith("listener.name.") and name.count(".") >= 3:
        base = name.split(".", 3)[3]  # after listener.name.NAME.; may start with a mechanism
        mechanism_config = next((c for c in _MECHANISM_CONFIGS if base.endswith(c)), None)
        return (name, mechanism_config or base)
    return (name,)


class BrokerConfig:
    """Typed, validated broker configuration; immutable (a dynamic change makes a new one).

    ``cfg["log.segment.bytes"]`` and ``cfg.get(name)`` return typed values: int, float,
    bool, str, tuple[str, ...] for LIST, ``Password`` for PASSWORD, a class name (str) for
    CLASS, or None when unset. Construction raises ``ConfigError`` naming the offending key.
    """

    def __init__(
        self,
        props: Mapping[str, str] | None = None,
        *,
        dynamic_default: Mapping[str, str] | None = None,
        dynamic_broker: Mapping[str, str] | None = None,
    ) -> None:
        self._static = _populate_id_synonyms(dict(props or {}))
        self._dynamic_default = dict(dynamic_default or {})
        self._dynamic_broker = dict(dynamic_broker or {})
        self.unknown_keys: tuple[str, ...] = tuple(
            k for k in self._static if k not in BROKER_CONFIGS and not k.startswith(_PREFIXED_KEYS)
        )
        _check_dynamic(self._dynamic_default, per_broker=False)
        _check_dynamic(self._dynamic_broker, per_broker=True)
        self._values: dict[str, object] = {}
        self._sources: dict[str, ConfigSource] = {}
        layers = self._layers_low_to_high()
        for name, key in BROKER_CONFIGS.items():
            self._values[name] = key.default
            self._sources[name] = ConfigSource.DEFAULT_CONFIG
            for source, layer in layers:
                if name in layer:
                    self._values[name] = key.parse(layer[name])
                    self._sources[name] = source
        if self._values["node.id"] is None:  # neither id given: node.id follows broker.id
            self._values["node.id"] = self._values["broker.id"]
        self._validate()

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str] | None = None,
        overrides: Mapping[str, str] | Iterable[str] = (),
    ) -> BrokerConfig:
        """The broker's start-up config: a server.properties file, then overrides on top.

        ``overrides`` are ``--override`` arguments ("key=value") or a mapping. Unknown keys
        are kept and logged as a warning, in Kafka's words, not refused.
        """
        props = read_properties(path) if path is not None else {}
        if isinstance(overrides, str):
            raise TypeError("overrides must be a list of 'key=value' strings or a mapping")
        if isinstance(overrides, Mapping):
            props.update(overrides)
        else:
            props.update(parse_override(arg) for arg in overrides)
        cfg = cls(props)
        for key in cfg.unknown_keys:
            log.warning("The configuration '%s' was supplied but isn't a known config.", key)
        return cfg

    def with_dynamic(
        self,
        *,
        dynamic_default: Mapping[str, str] | None = None,
        dynamic_broker: Mapping[str, str] | None = None,
    ) -> BrokerConfig:
        """A copy with the dynamic layers replaced (None keeps a layer as it is).

        Mirrors how Kafka reloads /config/brokers/<default> and /config/brokers/<id> whole.
        Raises ``ConfigError`` for a key that is not dynamic, a per-broker-only key given as
        a cluster default, or a value the merged config rejects.
        """
        return BrokerConfig(
            self._static,
            dynamic_default=self._dynamic_default if dynamic_default is None else dynamic_default,
            dynamic_broker=self._dynamic_broker if dynamic_broker is None else dynamic_broker,
        )

    # ------------------------------------------------------------------ values

    def __getitem__(self, name: str) -> object:
        try:
            return self._values[name]
        except KeyError:
            raise KeyError(f"Unknown broker config: {name}") from None

    def get(self, name: str, default: object = None) -> object:
        return self._values.get(name, default)

    def get_int(self, name: str) -> int:
        value = self[name]
        assert isinstance(value, int) and not isinstance(value, bool), name
        return value

    def get_bool(self, name: str) -> bool:
        value = self[name]
        assert isinstance(value, bool), name
        return value

    def get_str(self, name: str) -> str | None:
        value = self[name]
        assert value is None or isinstance(value, str), name
        return value

    def get_list(self, name: str) -> tuple[str, ...] | None:
        value = self[name]
        assert value is None or isinstance(value, tuple), name
        return value

    def listener_value(self, listener: str, name: str, mechanism: str | None = None) -> object:
        """``name`` as the listener sees it: Kafka's ``valuesWithPrefixOverride``.

        ``listener.name.<listener>.<name>`` (the listener in lower case) wins over ``name``;
        for per-mechanism SASL settings, ``listener.name.<listener>.<mechanism>.<name>``
        (``listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config``) is the only place Kafka
        reads on a broker, so with ``mechanism`` given nothing else is looked at.
        """
        prefix = f"listener.name.{listener.lower()}."
        key = f"{prefix}{mechanism.lower()}.{name}" if mechanism else f"{prefix}{name}"
        for _, layer in reversed(self._layers_low_to_high()):
            if key in layer:
                return BROKER_CONFIGS[name].parse(layer[key])
        return None if mechanism else self[name]

    def listener_getter(self, listener: str) -> Callable[[str], object]:
        """``listener_value`` with the listener bound, for code that reads settings by name."""
        return lambda name: self.listener_value(listener, name)

    @property
    def originals(self) -> Mapping[str, str]:
        """The static config as supplied (unknown and per-listener keys included)."""
        return self._static

    def source(self, name: str) -> ConfigSource:
        """Where the value of ``name`` comes from (DescribeConfigs' config_source)."""
        if name not in self._sources:
            raise KeyError(f"Unknown broker config: {name}")
        return self._sources[name]

    def synonyms(self, name: str) -> list[ConfigSynonym]:
        """DescribeConfigs' synonyms for broker config ``name``, in Kafka's order.

        As Kafka's ConfigHelper: for each layer from highest to lowest (dynamic per-broker,
        dynamic default, static, default), every synonym set in that layer; then entries
        before the first one named ``name`` are dropped.
        """
        sensitive = name in BROKER_CONFIGS and BROKER_CONFIGS[name].sensitive
        result: list[ConfigSynonym] = []
        for source, layer in reversed(self._layers_low_to_high(with_defaults=True)):
            for synonym in broker_config_synonyms(name):
                if synonym in layer:
                    value = None if sensitive else layer[synonym]
                    result.append(ConfigSynonym(synonym, value, source))
        while result and result[0].name != name:
            result.pop(0)
        return result

    def resolve(self, names: Sequence[str]) -> object:
        """The first of ``names`` that is set, converted to ms when it is in hours or minutes.

        This is how Kafka turns a topic config's broker synonyms into the topic default
        (log.roll.hours=2 gives segment.ms=7200000).
        """
        for name in names:
            value = self[name]
            if value is None:
                continue
            if name.endswith(".hours"):
                assert isinstance(value, int)
                return value * HOUR_MS
            if name.endswith(".minutes"):
                assert isinstance(value, int)
                return value * MINUTE_MS
            return value
        return None

    # ------------------------------------------------------------------ derived

    def retention_ms(self) -> int:
        """log.retention.ms, else .minutes, else .hours, in ms; any negative is -1 (forever)."""
        value = self.resolve(TOPIC_CONFIGS["retention.ms"].synonyms)
        assert isinstance(value, int)
        return -1 if value < 0 else value

    def segment_ms(self) -> int:
        """log.roll.ms, else log.roll.hours, in ms."""
        value = self.resolve(TOPIC_CONFIGS["segment.ms"].synonyms)
        assert isinstance(value, int)
        return value

    def segment_jitter_ms(self) -> int:
        """log.roll.jitter.ms, else log.roll.jitter.hours, in ms."""
        value = self.resolve(TOPIC_CONFIGS["segment.jitter.ms"].synonyms)
        assert isinstance(value, int)
        return value

    def flush_ms(self) -> int:
        """log.flush.interval.ms, else log.flush.scheduler.interval.ms."""
        value = self.resolve(TOPIC_CONFIGS["flush.ms"].synonyms)
        assert isinstance(value, int)
        return value

    def log_dirs(self) -> list[Path]:
        """The data directories: log.dirs, else log.dir (comma separated, as Kafka reads them)."""
        dirs = self.get_list("log.dirs")
        if dirs is None:
            dirs = self.get_list("log.dir") or ()
        return [Path(d) for d in dirs if d]

    def security_protocol_map(self) -> dict[str, str]:
        """listener.security.protocol.map as listener name (upper case) -> security protocol."""
        text = self.get_str("listener.security.protocol.map") or ""
        result: dict[str, str] = {}
        for pair in parse_list(text):
            name, colon, protocol = pair.rpartition(":")
            if not colon:
                raise ConfigError(
                    "listener.security.protocol.map",
                    "Error parsing configuration property 'listener.security.protocol.map': "
                    f"expected NAME:PROTOCOL but got '{pair}'",
                )
            if protocol.strip().upper() not in SECURITY_PROTOCOLS:
                raise ConfigError(
                    "listener.security.protocol.map",
                    f"Invalid security protocol `{protocol.strip()}` defined in "
                    "listener.security.protocol.map",
                )
            result[name.strip().upper()] = protocol.strip().upper()
        return result

    def listeners(self) -> list[Listener]:
        """The endpoints to bind, from ``listeners``."""
        entries = self.get_list("listeners") or ()
        return _parse_listeners("listeners", entries, self.security_protocol_map(), True)

    def advertised_listeners(self, bound_ports: Mapping[str, int] | None = None) -> list[Listener]:
        """The endpoints given to clients: advertised.listeners, else the listeners.

        As Kafka does, an empty host is replaced by this machine's canonical host name. A
        listener bound to port 0 advertises the port it got, given in ``bound_ports``
        (listener name -> port) by the server once it has bound its sockets.
        """
        entries = self.get_list("advertised.listeners")
        if entries is None:
            endpoints = self.listeners()
        else:
            protocols = self.security_protocol_map()
            endpoints = _parse_listeners("advertised.listeners", entries, protocols, False)
        ports = bound_ports or {}
        return [
            ep._replace(
                host=ep.host or socket.getfqdn(),
                port=ports.get(ep.name, ep.port) if ep.port == 0 else ep.port,
            )
            for ep in endpoints
        ]

    def inter_broker_listener_name(self) -> str:
        """inter.broker.listener.name, else the one named after security.inter.broker.protocol."""
        name = self.get_str("inter.broker.listener.name")
        if name is None:
            return self.get_str("security.inter.broker.protocol") or "PLAINTEXT"
        return name.upper()

    # ------------------------------------------------------------------ internals

    def _layers_low_to_high(
        self, *, with_defaults: bool = False
    ) -> list[tuple[ConfigSource, Mapping[str, str]]]:
        layers: list[tuple[ConfigSource, Mapping[str, str]]] = []
        if with_defaults:
            layers.append((ConfigSource.DEFAULT_CONFIG, _DEFAULT_TEXTS))
        layers += [
            (ConfigSource.STATIC_BROKER_CONFIG, self._static),
            (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, self._dynamic_default),
            (ConfigSource.DYNAMIC_BROKER_CONFIG, self._dynamic_broker),
        ]
        return layers

    def _validate(self) -> None:
        """The cross-config rules Kafka checks at start (KafkaConfig.validateValues)."""
        if self["node.id"] != self["broker.id"]:
            raise ConfigError("node.id", "You must set `node.id` to the same value as `broker.id`.")
        if self.segment_ms() < 1:
            raise ConfigError("log.roll.ms", "log.roll.ms must be greater than or equal to 1")
        if self.segment_jitter_ms() < 0:
            raise ConfigError(
                "log.roll.jitter.ms", "log.roll.jitter.ms must be greater than or equal to 0"
            )
        queued_bytes = self.get_int("queued.max.request.bytes")
        if 0 < queued_bytes < self.get_int("socket.request.max.bytes"):
            raise ConfigError(
                "queued.max.request.bytes",
                "queued.max.request.bytes must be larger or equal to socket.request.max.bytes",
            )
        if self.retention_ms() == 0:
            raise ConfigError(
                "log.retention.ms",
                "log.retention.ms must be unlimited (-1) or, greater than or equal to 1",
            )
        if not self.log_dirs():
            raise ConfigError(
                "log.dirs", "At least one log directory must be defined via log.dirs or log.dir."
            )
        self._validate_compaction_lag()
        self._validate_replica_fetch()
        self._validate_listeners()
        self._validate_cordoned_log_dirs()
        self._validate_share_assignors()

    def _validate_share_assignors(self) -> None:
        """GroupCoordinatorConfig's rule: one share group assignor (the table's validator keeps
        it to the simple assignor, the one kpybroker has)."""
        found = len(self.get_list("group.share.assignors") or ())
        if found != 1:
            raise ConfigError(
                "group.share.assignors",
                f"group.share.assignors must contain exactly one assignor, but found {found}",
            )

    def _validate_cordoned_log_dirs(self) -> None:
        """KafkaConfig.validateCordonedLogDirs: ``*`` alone, or entries of log.dirs (log.dir)
        as written there. Scala's ``require``, so a client changing it is told INVALID_REQUEST."""
        cordoned = self.get_list("cordoned.log.dirs") or ()
        if "*" in cordoned:
            if len(cordoned) != 1:
                raise RequirementFailed(
                    "cordoned.log.dirs",
                    "When cordoned.log.dirs is set to *, it must not contain other values",
                )
            return
        configured = self.get_list("log.dirs")
        if configured is None:
            configured = self.get_list("log.dir") or ()
        missing = [d for d in cordoned if d not in configured]
        if missing:
            raise RequirementFailed(
                "cordoned.log.dirs",
                "All entries in cordoned.log.dirs must be present in log.dirs or log.dir. "
                f"Missing entries : {','.join(missing)}",
            )

    def _validate_compaction_lag(self) -> None:
        min_lag = self.get_int("log.cleaner.min.compaction.lag.ms")
        max_lag = self.get_int("log.cleaner.max.compaction.lag.ms")
        if min_lag > max_lag:
            raise ConfigError(
                "log.cleaner.min.compaction.lag.ms",
                f"conflict topic config setting min.compaction.lag.ms ({min_lag}) > "
                f"max.compaction.lag.ms ({max_lag})",
            )

    def _validate_replica_fetch(self) -> None:
        wait = self.get_int("replica.fetch.wait.max.ms")
        if wait > self.get_int("replica.socket.timeout.ms"):
            raise ConfigError(
                "replica.socket.timeout.ms",
                "replica.socket.timeout.ms should always be at least replica.fetch.wait.max.ms "
                "to prevent unnecessary socket timeouts",
            )
        if wait > self.get_int("replica.lag.time.max.ms"):
            raise ConfigError(
                "replica.fetch.wait.max.ms",
                "replica.fetch.wait.max.ms should always be less than or equal to "
                "replica.lag.time.max.ms to prevent frequent changes in ISR",
            )

    def _validate_listeners(self) -> None:
        protocols = self.security_protocol_map()
        listener_names = {ep.name for ep in self.listeners()}
        advertised = self.get_list("advertised.listeners")
        if advertised is None:
            advertised_eps = self.listeners()
        else:
            advertised_eps = _parse_listeners("advertised.listeners", advertised, protocols, False)
        if any(ep.host == "0.0.0.0" for ep in advertised_eps):
            raise ConfigError(
                "advertised.listeners",
                "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. "
                "Use a routable IP address.",
            )
        advertised_names = {ep.name for ep in advertised_eps}
        if not advertised_names <= listener_names:
            found, valid = ",".join(sorted(advertised_names)), ",".join(sorted(listener_names))
            raise ConfigError(
                "advertised.listeners",
                "advertised.listeners listener names must be equal to or a subset of the ones "
                f"defined in listeners. Found {found}. The valid options based on the current "
                f"configuration are {valid}",
            )
        name = self.get_str("inter.broker.listener.name")
        if name is not None:
            if "security.inter.broker.protocol" in self._static:
                raise ConfigError(
                    "inter.broker.listener.name",
                    "Only one of inter.broker.listener.name and security.inter.broker.protocol "
                    "should be set.",
                )
            if name.upper() not in protocols:
                raise ConfigError(
                    "inter.broker.listener.name",
                    f"Listener with name {name.upper()} defined in inter.broker.listener.name "
                    "not found in listener.security.protocol.map.",
                )
        if self.inter_broker_listener_name() not in advertised_names:
            raise ConfigError(
                "inter.broker.listener.name",
                "inter.broker.listener.name must be a listener name defined in "
                "advertised.listeners. The valid options based on currently configured "
                f"listeners are {','.join(sorted(advertised_names))}",
            )


# The DEFAULT_CONFIG layer as text; Kafka leaves out configs whose default is null.
_DEFAULT_TEXTS: dict[str, str] = {
    name: text
    for name, key in BROKER_CONFIGS.items()
    if (text := key.to_text(key.default)) is not None
}


class RequirementFailed(ConfigError):
    """A rule Kafka's config checks with Scala's ``require``: an IllegalArgumentException,
    which a client altering the config is told as INVALID_REQUEST, not INVALID_CONFIG."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(key, f"requirement failed: {message}")
        self.code = ErrorCode.INVALID_REQUEST


def _populate_id_synonyms(props: dict[str, str]) -> dict[str, str]:
    """As Kafka's populateSynonyms: when only one of broker.id and node.id is given, both are."""
    if "broker.id" not in props and "node.id" in props:
        props["broker.id"] = props["node.id"]
    elif "node.id" not in props and "broker.id" in props:
        props["node.id"] = props["broker.id"]
    return props


def _check_dynamic(layer: Mapping[str, str], *, per_broker: bool) -> None:
    """Kafka's DynamicBrokerConfig.validateConfigs: only dynamic keys, at the right level."""
    not_dynamic = sorted(
        k for k in layer if k not in BROKER_CONFIGS or not BROKER_CONFIGS[k].dynamic
    )
    if not_dynamic:
        raise ConfigError(
            not_dynamic[0], f"Cannot update these configs dynamically: {', '.join(not_dynamic)}"
        )
    if not per_broker:
        broker_only = sorted(k for k in layer if BROKER_CONFIGS[k].mode is UpdateMode.PER_BROKER)
        if broker_only:
            raise ConfigError(
                broker_only[0],
                "Cannot update these configs at default cluster level, broker id must be "
                f"specified: {', '.join(broker_only)}",
            )


def _parse_listeners(
    key: str, entries: tuple[str, ...], protocols: Mapping[str, str], distinct_ports: bool
) -> list[Listener]:
    """Kafka's listenerListToEndPoints, with its checks on names and ports."""
    text = ",".join(entries)

    def fail(problem: str) -> ConfigError:
        return ConfigError(key, f"Error creating broker listeners from '{text}': {problem}")

    endpoints: list[Listener] = []
    for entry in entries:
        if not entry:
            continue
        match = _LISTENER.fullmatch(entry)
        if match is None:
            raise fail(f"Unable to parse {entry} to a broker endpoint")
        name, host, port = match.group(1).upper(), match.group(2), int(match.group(3))
        if name not in protocols:
            raise fail(f"No security protocol defined for listener {name}")
        if not 0 <= port <= 65535:
            raise fail(f"Port {port} of listener {name} is out of range")
        endpoints.append(Listener(name, host, port, protocols[name]))

    if len({ep.name for ep in endpoints}) != len(endpoints):
        raise ConfigError(key, f"Each listener must have a different name, {key}: {text}")
    if distinct_ports:
        for port in {ep.port for ep in endpoints if ep.port != 0}:
            _check_shared_port(key, text, [ep for ep in endpoints if ep.port == port])
    return endpoints


def _check_shared_port(key: str, text: str, endpoints: list[Listener]) -> None:
    """Two listeners may share a port only if one binds an IPv4 address and the other IPv6."""
    if len(endpoints) < 2:
        return
    versions: list[int | None] = []
    for ep in endpoints:
        try:
            versions.append(ipaddress.ip_address(ep.host).version)
        except ValueError:
            versions.append(None)
    if len(versions) != 2 or set(versions) != {4, 6}:
        raise ConfigError(
            key,
            "Each listener must have a different port unless exactly one listener has an IPv4 "
            f"address and the other IPv6 address, {key}: {text}, port: {endpoints[0].port}",
        )
