"""Whole responses as observations: every field of the version sent, by path.

Observations of chosen fields passed while kpybroker answered an errored
Fetch partition with null records where Kafka sends empty ones, which hung
every librdkafka consumer. So a response is recorded whole: the response
schema (``protocol/*.schema``, read with the code generator's own parser) is
walked for the version that was sent, and every field present in that
version becomes one observation, ``label/responses[0]/partitions[1]/records``.
Null and empty stay apart (``None`` against ``[]``, ``""`` or ``b""``); an
array's length is its own observation, so a missing or extra element shows.

Some values differ between any two brokers and say nothing about
compatibility: random ids, the cluster id, the address the broker was
started on, Kafka's own request object printed in a refusal ("Request
<request> needs ALTER permission."). :data:`SHAPES` renders those by shape
(``"zero"``/``"set"``, ``"self"``), each with its reason. A scenario names anything else that may
differ as ``varies`` patterns, and those are recorded as ``"<varies>"`` on
both sides, present or absent, unless null or empty: null against a text
still differs. Where Kafka builds an array from a hash map
(ListOffsets and Produce group their answers so), its order is no contract:
a scenario names such arrays as ``unordered`` patterns, and both sides are
sorted by each element's first field (in that version), its name, id or index, before they are
compared. Both kinds of pattern are fnmatch patterns over the path below the
label with the array indexes left out: ``topics/partitions``,
``*log_append_time_ms``.
"""

from __future__ import annotations

import fnmatch
import importlib.util
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

from kpybroker.protocol.records import iter_batches

ROOT = Path(__file__).resolve().parents[3]
VARIES = "<varies>"
ZERO_UUID = bytes(16)
_UUID_TEXT = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _uuid_shape(value: Any, _where: Where) -> Any:
    return "zero" if value == ZERO_UUID else "set"


def _cluster_id_shape(value: Any, _where: Where) -> Any:
    return value if value is None else f"{len(value)}-char id"


def _member_id_shape(value: Any, _where: Where) -> Any:
    return value if not value else _UUID_TEXT.sub("<uuid>", value)


def _producer_id_shape(value: Any, _where: Where) -> Any:
    return "assigned" if value >= 0 else value


#: Kafka's refusal of a cluster operation (``AuthHelper.authorizeClusterOperation``).
_CLUSTER_DENIAL = re.compile(r"Request .+ needs ([A-Z_]+) permission\.", re.DOTALL)


def _error_message_shape(value: Any, _where: Where) -> Any:
    denial = _CLUSTER_DENIAL.fullmatch(value) if value else None
    return f"Request <request> needs {denial.group(1)} permission." if denial else value


def _host_shape(value: Any, where: Where) -> Any:
    return "self" if value == where.host else value


def _port_shape(value: Any, where: Where) -> Any:
    return "self" if value == where.port else value


class Where:
    """The broker a response came from, for shapes that compare against it."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port


#: Values rendered by shape, by field name (or ``type:uuid``), with the reason.
SHAPES: dict[str, tuple[Callable[[Any, Where], Any], str]] = {
    "type:uuid": (_uuid_shape, "topic, directory and member UUIDs are random per cluster"),
    "cluster_id": (_cluster_id_shape, "each cluster has its own random id"),
    "member_id": (_member_id_shape, "a member id ends in a random UUID"),
    "leader": (_member_id_shape, "JoinGroup's leader is a member id"),
    "producer_id": (_producer_id_shape, "producer ids come from each cluster's own counter"),
    "error_message": (
        _error_message_shape,
        "Kafka's refusal of a cluster operation, 'Request <request> needs ALTER permission.', "
        "prints its internal request object (processor, connection id, session, buffer), which "
        "no other broker can reproduce: compared with <request> in its place; other messages "
        "as they are",
    ),
    "host": (_host_shape, "each broker listens on its own free port"),
    "port": (_port_shape, "each broker listens on its own free port"),
}

#: The fields of a record batch header recorded for each batch of a records field.
BATCH_FIELDS = (
    "base_offset", "batch_length", "partition_leader_epoch", "magic", "crc", "attributes",
    "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id", "producer_epoch",
    "base_sequence", "record_count",
)  # fmt: skip


@cache
def _generator() -> Any:
    """``scripts/gen_protocol.py``, whose parser reads the schemas."""
    path = ROOT / "scripts" / "gen_protocol.py"
    spec = importlib.util.spec_from_file_location("kpybroker_gen_protocol", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@cache
def response_fields(module_name: str) -> list[Any]:
    """The response message's fields of one generated module (``fetch``)."""
    generator = _generator()
    schema = generator.parse_schema(generator.SCHEMA_DIR / f"{module_name}.schema")
    [message] = [m for m in schema.messages if m.class_name.endswith("Response")]
    return message.fields


@cache
def api_name(module_name: str) -> str:
    """The API's name in its schema (``Fetch``)."""
    generator = _generator()
    return generator.parse_schema(generator.SCHEMA_DIR / f"{module_name}.schema").name


def general(path: str) -> str:
    """``path`` without its array indexes: ``responses/partitions/records/bytes``."""
    return _INDEX.sub("", path).removesuffix("#")


def module_of(request: Any) -> str:
    """The generated module a request object comes from: ``fetch``."""
    return type(request).__module__.rsplit(".", 1)[1]


class Walk:
    """One response being flattened: its version, broker and unordered arrays."""

    def __init__(self, version: int, where: Where, unordered: Iterable[str]) -> None:
        self.version = version
        self.where = where
        self.unordered = tuple(unordered)

    def in_order(self, path: str, field: Any, items: list[Any]) -> list[Any]:
        if not matches(path, self.unordered):
            return items
        first = next(f for f in field.children if f.present(self.version))

        def key(item: Any) -> tuple[str, str]:
            # A random id sorts by its shape, then by what the element holds.
            return repr(_shaped(first, getattr(item, first.name), self.where)), repr(
                list(_walk(item, field.children, self, ""))
            )

        return sorted(items, key=key)


_INDEX = re.compile(r"\[\d+\]")


def matches(path: str, patterns: tuple[str, ...]) -> bool:
    """Whether ``path``, its array indexes left out, matches one of ``patterns``."""
    return any(fnmatch.fnmatchcase(general(path), pattern) for pattern in patterns)


def flatten(
    response: Any,
    request: Any,
    version: int,
    where: Where,
    varies: Iterable[str] = (),
    unordered: Iterable[str] = (),
) -> dict[str, Any]:
    """Every field of ``response`` present in ``version``, by path."""
    patterns = tuple(varies)
    walk = Walk(version, where, unordered)
    out: dict[str, Any] = {}
    for path, value in _walk(response, response_fields(module_of(request)), walk, ""):
        if matches(path, patterns) and value not in (None, "", 0):
            value = VARIES
        out[path] = value
    return out


def _walk(obj: Any, fields: list[Any], walk: Walk, prefix: str) -> Iterator:
    for field in fields:
        if not field.present(walk.version):
            continue
        path = f"{prefix}{field.name}"
        value = getattr(obj, field.name)
        if field.is_struct:
            if field.array:
                if value is None:
                    yield path, None
                    continue
                yield f"{path}#", len(value)
                for index, item in enumerate(walk.in_order(path, field, value)):
                    yield from _walk(item, field.children, walk, f"{path}[{index}]/")
            elif value is None:
                yield path, None
            else:
                yield from _walk(value, field.children, walk, f"{path}/")
        elif field.type == "records":
            yield from _records(path, value)
        else:
            yield path, _shaped(field, value, walk.where)


def _shaped(field: Any, value: Any, where: Where) -> Any:
    shape = SHAPES.get(f"type:{field.type}") or SHAPES.get(field.name)
    if shape and value is not None:
        if field.array:
            return [shape[0](v, where) for v in value]
        return shape[0](value, where)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    return value


def _records(path: str, value: Any) -> Iterator[tuple[str, Any]]:
    """A records field: null, or its size and each batch header (a cut last batch as its size)."""
    if value is None:
        yield path, None
        return
    data = bytes(value)
    yield f"{path}/bytes", len(data)
    used = 0
    for index, (_, header) in enumerate(iter_batches(data)):
        for name in BATCH_FIELDS:
            yield f"{path}/batch[{index}]/{name}", getattr(header, name)
        used += header.size
    if used < len(data):
        yield f"{path}/partial batch bytes", len(data) - used
