"""The request schemas, read from ``protocol/*.schema`` by the code generator's own parser.

The fuzzer must know every field of every request version; reading the schema
files (rather than listing fields here) keeps it in step with the codecs.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from kpybroker.protocol.messages import SCHEMAS

ROOT = Path(__file__).resolve().parents[3]
GENERATOR = ROOT / "scripts" / "gen_protocol.py"


@cache
def generator() -> ModuleType:
    """``scripts/gen_protocol.py``, imported as a module (scripts/ is not a package)."""
    spec = importlib.util.spec_from_file_location("gen_protocol", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gen_protocol", module)  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class RequestSchema:
    """One API's request: its fields (``gen_protocol.Field``) and the generated codec."""

    api_key: int
    name: str
    fields: list[Any]
    low: int
    high: int
    flexible_from: int | None
    codec: ModuleType

    def flexible(self, version: int) -> bool:
        return self.flexible_from is not None and version >= self.flexible_from

    @property
    def request_class(self) -> type:
        return getattr(self.codec, self.name + "Request")

    @property
    def response_class(self) -> type:
        return getattr(self.codec, self.name + "Response")

    def struct_class(self, field: Any) -> type:
        """The generated class of a struct field."""
        return getattr(self.codec, field.type)


@cache
def request_schemas() -> dict[int, RequestSchema]:
    """Every API's request schema, by API key."""
    gen = generator()
    schemas = {}
    for path in sorted(gen.SCHEMA_DIR.glob("*.schema")):
        schema = gen.parse_schema(path)
        if schema.api_key is None:
            continue
        request = next(m for m in schema.messages if m.class_name == schema.name + "Request")
        schemas[schema.api_key] = RequestSchema(
            api_key=schema.api_key,
            name=schema.name,
            fields=request.fields,
            low=schema.versions.low,
            high=schema.versions.high,
            flexible_from=None if schema.flexible is None else schema.flexible.low,
            codec=SCHEMAS[schema.api_key],
        )
    return schemas


def all_versions() -> list[tuple[int, int]]:
    """Every (API key, version) the schemas declare."""
    return [
        (key, version)
        for key, schema in request_schemas().items()
        for version in range(schema.low, schema.high + 1)
    ]
