"""The pieces every config table is made of: types, validators, keys, and value parsing.

These mirror Kafka's ``org.apache.kafka.common.config.ConfigDef`` closely on purpose:
operators read Kafka's documentation, clients compare DescribeConfigs answers with
Kafka's, and error messages are matched by scripts. So a value is parsed the way
``ConfigDef.parseType`` parses it, validators print their "valid values" the way
Kafka's docs do, and errors read exactly like Kafka's ``ConfigException``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from enum import IntEnum, StrEnum

# Java's MAX_VALUEs are defined once, in the log layer (below this one); re-exported here.
from kpybroker.log.log_config import DOUBLE_MAX as DOUBLE_MAX
from kpybroker.log.log_config import INT_MAX as INT_MAX
from kpybroker.log.log_config import LONG_MAX as LONG_MAX
from kpybroker.protocol.errors import ErrorCode, KafkaError

HOUR_MS = 60 * 60 * 1000
MINUTE_MS = 60 * 1000


class ConfigType(IntEnum):
    """Kafka's ``ConfigDef.Type``; the numbers are DescribeConfigs' ``ConfigType`` ids (v3+)."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class Importance(StrEnum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class UpdateMode(StrEnum):
    """How a config may change while the broker runs (Kafka's "Update Mode" column).

    Broker configs are read-only unless Kafka's DynamicBrokerConfig lists them: per-broker
    ones may be altered for one broker, cluster-wide ones also as a cluster default.
    Topic configs can always be altered, per topic; group configs per group.
    """

    READ_ONLY = "read-only"
    PER_BROKER = "per-broker"
    CLUSTER_WIDE = "cluster-wide"
    PER_TOPIC = "per-topic"
    PER_GROUP = "per-group"


class ConfigSource(IntEnum):
    """Where a value came from; the numbers are DescribeConfigs' ``ConfigSource`` ids."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class ConfigError(KafkaError):
    """An invalid or unknown config; answered to clients as INVALID_CONFIG.

    ``message`` is the whole text, in Kafka's words, and always names ``key``.
    """

    def __init__(self, key: str, message: str) -> None:
        super().__init__(ErrorCode.INVALID_CONFIG, message)
        self.key = key

    @classmethod
    def invalid_value(cls, key: str, value: object, reason: str) -> ConfigError:
        """Kafka's ``ConfigException(name, value, message)`` wording."""
        return cls(key, f"Invalid value {java_str(value)} for configuration {key}: {reason}")


class Password:
    """A secret value; it prints as ``[hidden]`` so that it never reaches a log line."""

    __slots__ = ("value",)

    def __init__(self, value: str) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Password) and other.value == self.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return "[hidden]"

    __str__ = __repr__


def java_str(value: object) -> str:
    """Format a value the way Java's string concatenation would (for Kafka-identical text)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float):
        return _java_double(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(java_str(v) for v in value) + "]"
    return str(value)


def _java_double(value: float) -> str:
    """Java's ``Double.toString``: plain between 1e-3 and 1e7, else like 1.0E10."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        text = repr(value)
        return text if "." in text else text + ".0"
    _, digits, exponent = Decimal(repr(abs(value))).normalize().as_tuple()
    assert isinstance(exponent, int)
    mantissa = str(digits[0]) + "." + ("".join(map(str, digits[1:])) or "0")
    sign = "-" if value < 0 else ""
    return f"{sign}{mantissa}E{len(digits) - 1 + exponent}"


# --------------------------------------------------------------------------- validators


class Validator:
    """Checks a parsed value; ``str()`` is the "Valid Values" text of Kafka's docs."""

    def validate(self, key: str, value: object) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self})"


class Range(Validator):
    """Kafka's ``Range.atLeast`` / ``Range.between`` (bounds inclusive)."""

    def __init__(self, min: float | None = None, max: float | None = None) -> None:
        self.min = min
        self.max = max

    def validate(self, key: str, value: object) -> None:
        if value is None:
            raise ConfigError.invalid_value(key, None, "Value must be non-null")
        assert isinstance(value, (int, float))
        if self.min is not None and value < self.min:
            raise ConfigError.invalid_value(key, value, f"Value must be at least {self.min}")
        if self.max is not None and value > self.max:
            raise ConfigError.invalid_value(key, value, f"Value must be no more than {self.max}")

    def __str__(self) -> str:
        low = "" if self.min is None else f"{self.min},"
        high = "" if self.max is None else f",{self.max}"
        return f"[{low}...{high}]"


class OneOf(Validator):
    """Kafka's ``ValidString.in`` (or ``CaseInsensitiveValidString.in``) for a STRING."""

    def __init__(self, *values: str, case_insensitive: bool = False) -> None:
        self.values = values
        self.case_insensitive = case_insensitive

    def validate(self, key: str, value: object) -> None:
        if self.case_insensitive:
            if not isinstance(value, str) or value.upper() not in self.values:
                choices = ", ".join(self.values)
                reason = f"String must be one of (case insensitive): {choices}"
                raise ConfigError.invalid_value(key, value, reason)
        elif value not in self.values:
            reason = "String must be one of: " + ", ".join(self.values)
            raise ConfigError.invalid_value(key, value, reason)

    def __str__(self) -> str:
        prefix = "(case insensitive) " if self.case_insensitive else ""
        return prefix + "[" + ", ".join(self.values) + "]"


class EachOneOf(OneOf):
    """Kafka's ``ValidList.in``: every item of a LIST must be one of the values."""

    def validate(self, key: str, value: object) -> None:
        assert isinstance(value, tuple)
        for item in value:
            super().validate(key, item)


class NonEmptyString(Validator):
    """Kafka's ``NonEmptyString``: unset is fine, an empty string is not."""

    def validate(self, key: str, value: object) -> None:
        if value == "":
            raise ConfigError.invalid_value(key, value, "String must be non-empty")

    def __str__(self) -> str:
        return "non-empty string"


class Predicate(Validator):
    """A one-off rule: ``check`` returns the reason a value is wrong, or None."""

    def __init__(self, check: Callable[[str, object], str | None], text: str) -> None:
        self.check = check
        self.text = text

    def validate(self, key: str, value: object) -> None:
        reason = self.check(key, value)
        if reason is not None:
            raise ConfigError.invalid_value(key, value, reason)

    def __str__(self) -> str:
        return self.text


def _gzip_level(_key: str, value: object) -> str | None:
    assert isinstance(value, int)
    if value > 9 or (value < 1 and value != -1):
        return "Value must be between 1 and 9 or equal to -1"
    return None


def _throttled_replicas(key: str, value: object) -> str | None:
    assert isinstance(value, tuple)
    items = [item.strip() for item in value]
    if "".join(items) == "*" or all(re.fullmatch(r"([0-9]+:[0-9]+)?", i) for i in items):
        return None
    return (
        f"{key} must be the literal '*' or a list of replicas in the following format: "
        "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
    )


GZIP_LEVEL = Predicate(_gzip_level, "[1,...,9] or -1")
THROTTLED_REPLICAS = Predicate(
    _throttled_replicas, "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
)


# --------------------------------------------------------------------------- keys


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """One config: Kafka's ``ConfigDef.ConfigKey`` plus what kpybroker makes of it.

    ``default`` is the parsed value (None = unset, Kafka's null). ``enforced`` says whether
    kpybroker acts on the value; one that is not is still parsed, validated, stored and
    described, so a Kafka server.properties works unchanged. ``kafka_default`` is Kafka's
    default, as text, where kpybroker deliberately uses another one. ``synonyms`` (topic
    and group configs) are the broker configs that supply the topic's or group's default,
    first one winning, as in Kafka's ``ServerTopicConfigSynonyms`` and ``GroupConfig``.
    """

    name: str
    type: ConfigType
    default: object
    importance: Importance
    doc: str
    valid: Validator | None = None
    mode: UpdateMode = UpdateMode.READ_ONLY
    enforced: bool = False
    internal: bool = False
    kafka_default: str | None = None
    synonyms: tuple[str, ...] = ()

    @property
    def sensitive(self) -> bool:
        """Kafka hides PASSWORD values in DescribeConfigs and logs."""
        return self.type is ConfigType.PASSWORD

    @property
    def dynamic(self) -> bool:
        return self.mode is not UpdateMode.READ_ONLY

    def parse(self, raw: str) -> object:
        """Parse and validate a value given as text."""
        value = parse_value(self.name, self.type, raw)
        if self.valid is not None:
            self.valid.validate(self.name, value)
        return value

    def to_text(self, value: object) -> str | None:
        """The value as Kafka would print it (``ConfigDef.convertToString``)."""
        if value is None:
            return None
        if isinstance(value, Password):
            return value.value
        if isinstance(value, tuple):
            return ",".join(value)
        return java_str(value)


# --------------------------------------------------------------------------- parsing

_JAVA_WHITESPACE = "".join(chr(c) for c in range(33))  # what String.trim() removes
_COMMA = re.compile(r"[ \t\n\x0b\f\r]*,[ \t\n\x0b\f\r]*")
_INTEGER = re.compile(r"[+-]?[0-9]+")
_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)[fFdD]?")
_INTEGER_BITS = {ConfigType.SHORT: 16, ConfigType.INT: 32, ConfigType.LONG: 64}


def java_trim(text: str) -> str:
    return text.strip(_JAVA_WHITESPACE)


def parse_list(text: str) -> tuple[str, ...]:
    """Kafka's LIST parsing: trimmed, comma separated, whitespace around commas dropped."""
    trimmed = java_trim(text)
    return tuple(_COMMA.split(trimmed)) if trimmed else ()


def parse_value(key: str, type: ConfigType, raw: str) -> object:
    """Kafka's ``ConfigDef.parseType`` for a value given as text.

    Numbers follow Java's rules, not Python's: no underscores, no "inf", and a value that
    does not fit the type's width is "Not a number" rather than silently growing.
    """
    trimmed = java_trim(raw)
    match type:
        case ConfigType.BOOLEAN:
            if trimmed.lower() in ("true", "false"):
                return trimmed.lower() == "true"
            raise ConfigError.invalid_value(key, raw, "Expected value to be either true or false")
        case ConfigType.STRING | ConfigType.CLASS:
            return trimmed
        case ConfigType.PASSWORD:
            return Password(trimmed)
        case ConfigType.LIST:
            return parse_list(trimmed)
        case ConfigType.SHORT | ConfigType.INT | ConfigType.LONG:
            bits = _INTEGER_BITS[type]
            if _INTEGER.fullmatch(trimmed):
                number = int(trimmed)
                if -(2 ** (bits - 1)) <= number < 2 ** (bits - 1):
                    return number
        case ConfigType.DOUBLE:
            if _DOUBLE.fullmatch(trimmed):
                return float(trimmed.rstrip("fFdD"))
    raise ConfigError.invalid_value(key, raw, f"Not a number of type {type.name}")


def index_keys(keys: Iterable[ConfigKey]) -> dict[str, ConfigKey]:
    """Index a table by name, refusing a name defined twice (a table typo, caught at import)."""
    index: dict[str, ConfigKey] = {}
    for key in keys:
        if key.name in index:
            raise ValueError(f"Configuration {key.name} is defined twice.")
        index[key.name] = key
    return index


def check_names_and_values(
    configs: Mapping[str, object], table: Mapping[str, object], kind: str
) -> None:
    """Kafka's first checks of a resource's new configs, in its words: every name known
    to ``table``, then no null value (``kind``: "topic", "group")."""
    for name in configs:
        if name not in table:
            raise ConfigError(name, f"Unknown {kind} config name: {name}")
    for name, raw in configs.items():
        if raw is None:
            raise ConfigError(name, f"Null value not supported for {kind} configs: {name}")
