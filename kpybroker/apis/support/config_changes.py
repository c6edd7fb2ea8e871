"""What an AlterConfigs or IncrementalAlterConfigs request asks for, checked as Kafka checks it.

Both APIs carry a list of resources, each with config names and values. Before any
resource is touched, Kafka's ``ConfigAdminManager.preprocess`` refuses, per resource,
a resource named twice, a config named twice and a null value where one is needed
(``check_resources``), before it checks permissions. For a stored resource, Kafka's
controller then refuses an operation id it does not know (``unknown_operation``), and
``new_configs`` turns the request's operations into the resource's whole new dynamic
config set, as the controller does.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum

from kpybroker.config import ConfigError, ConfigKey, ConfigType
from kpybroker.protocol.errors import ErrorCode, KafkaError


class OpType(IntEnum):
    """Kafka's ``AlterConfigOp.OpType`` ids (IncrementalAlterConfigs)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


_OP_IDS = frozenset(int(op) for op in OpType)


@dataclass(frozen=True, slots=True)
class ConfigOp:
    """One requested change; AlterConfigs' plain values are SET operations."""

    name: str
    op: int
    value: str | None


#: A request's resources: (resource type id, resource name, changes).
Resources = Sequence[tuple[int, str, Sequence[ConfigOp]]]


def check_resources(resources: Resources) -> list[KafkaError | None]:
    """Per resource, the error Kafka's preprocessing gives it, or None to go on. An
    operation id Kafka does not know is not DELETE, so its value must not be null."""
    counts = Counter((type_id, name) for type_id, name, _ in resources)
    errors: list[KafkaError | None] = []
    for type_id, name, ops in resources:
        if counts[type_id, name] > 1:
            errors.append(_invalid("Each resource must appear at most once."))
        elif len({op.name for op in ops}) != len(ops):
            errors.append(_invalid("Error due to duplicate config keys"))
        elif nulls := [op.name for op in ops if op.value is None and op.op != OpType.DELETE]:
            errors.append(_invalid("Null value not supported for : " + ", ".join(nulls)))
        else:
            errors.append(None)
    return errors


def unknown_operation(ops: Sequence[ConfigOp]) -> KafkaError | None:
    """INVALID_REQUEST naming the first operation id Kafka does not know, if any."""
    unknown = [op.op for op in ops if op.op not in _OP_IDS]
    return _invalid(f"Unknown operations type {unknown[0]}") if unknown else None


def new_configs(
    current: Mapping[str, str],
    ops: Sequence[ConfigOp],
    key_for: Callable[[str], ConfigKey | None],
) -> dict[str, str]:
    """The dynamic config set after ``ops`` (IncrementalAlterConfigs' semantics).

    APPEND and SUBTRACT work on list configs only, item by item; they start from the
    current value, else the config's default. Keys are checked later, with the values.
    """
    result = dict(current)
    for op in ops:
        if op.op == OpType.SET:
            assert op.value is not None
            result[op.name] = op.value
        elif op.op == OpType.DELETE:
            result.pop(op.name, None)
        else:
            key = key_for(op.name)
            if key is None or key.type is not ConfigType.LIST:
                verb = OpType(op.op).name
                raise ConfigError(
                    op.name, f"Can't {verb} to key {op.name} because its type is not LIST."
                )
            old = result.get(op.name)
            items = _items(key.to_text(key.default) if old is None else old)
            assert op.value is not None
            changes = op.value.split(",")
            if op.op == OpType.APPEND:
                items += [item for item in changes if item not in items]
            else:
                items = [item for item in items if item not in changes]
            result[op.name] = ",".join(items)
    return result


def _items(text: str | None) -> list[str]:
    return [item for item in (text or "").split(",") if item]


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_REQUEST, message)
