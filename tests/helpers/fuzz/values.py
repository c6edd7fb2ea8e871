"""Hypothesis strategies for valid requests of any API key and version, field by field
from the schema.

Two profiles: ``CODEC`` draws any value the wire can carry; ``LIVE`` draws
values a live broker acts on quickly and without filling its disk, so that the
frames test the broker's parsing and handlers rather than its patience: topic
names from a small pool (so that produce requests reach the log's checks),
small numbers for timeouts, counts and partitions (a Fetch waiting 24 days or a
topic with 2^31 partitions is legal Kafka, but not a fuzzing result).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from hypothesis import strategies as st

from tests.helpers.fuzz.batches import record_sets
from tests.helpers.fuzz.schemas import RequestSchema, request_schemas

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
}
#: Topic names the live broker has (see ``live_target.TOPICS``), and one it does not.
TOPIC_POOL = ("fuzz", "fuzz-uncompressed", "fuzz-compact", "no-such-topic")
#: Fields whose large values make a live broker wait or allocate, not parse.
_BOUNDED_IN_LIVE = re.compile(r"(_ms|count|partitions|factor|_bytes|replicas|_id|epoch)$")
MAX_ITEMS = 3


@dataclass(frozen=True)
class Profile:
    name: str
    live: bool


CODEC = Profile("codec", live=False)
LIVE = Profile("live", live=True)


def _integers(type_name: str, field_name: str, profile: Profile) -> st.SearchStrategy[int]:
    low, high = INT_RANGES[type_name]
    small = st.integers(max(low, -2), min(high, 100))
    if profile.live and _BOUNDED_IN_LIVE.search(field_name):
        return small
    return st.one_of(small, st.sampled_from([low, high]), st.integers(low, high))


def _text(profile: Profile) -> st.SearchStrategy[str]:
    anything = st.text(max_size=12)
    return st.one_of(st.sampled_from(TOPIC_POOL), anything) if profile.live else anything


def _item(schema: RequestSchema, f: Any, version: int, profile: Profile) -> st.SearchStrategy:
    t = f.type
    if t in INT_RANGES:
        return _integers(t, f.name, profile)
    if t == "bool":
        return st.booleans()
    if t == "float64":
        return st.floats(allow_nan=False)
    if t == "string":
        return _text(profile)
    if t == "bytes":
        return st.binary(max_size=24)
    if t == "uuid":
        return st.one_of(st.just(bytes(16)), st.binary(min_size=16, max_size=16))
    if t == "records":
        return record_sets()
    return struct_values(schema, schema.struct_class(f), f.children, version, profile)


def _field(schema: RequestSchema, f: Any, version: int, profile: Profile) -> st.SearchStrategy:
    value = _item(schema, f, version, profile)
    if f.array:
        value = st.lists(value, max_size=MAX_ITEMS)
    if f.nullable_in(version):
        value = st.one_of(st.none(), value)
    return value


def struct_values(
    schema: RequestSchema, cls: type, fields: list[Any], version: int, profile: Profile
) -> st.SearchStrategy:
    """Instances of the generated class ``cls`` with every field on the wire in ``version``
    drawn (tagged ones only where tags exist); the others keep their defaults."""
    flexible = schema.flexible(version)
    drawn = {
        f.name: _field(schema, f, version, profile)
        for f in fields
        if f.present(version) and (f.tag is None or flexible)
    }
    return st.builds(cls, **drawn)


@cache
def requests(api_key: int, version: int, profile: Profile = CODEC) -> st.SearchStrategy:
    """Valid request objects of ``api_key`` at ``version``."""
    schema = request_schemas()[api_key]
    return struct_values(schema, schema.request_class, schema.fields, version, profile)
