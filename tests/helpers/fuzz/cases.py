"""Fuzz cases: a valid request frame of some API key and version, and its mutations."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from tests.helpers.fuzz.mutations import MUTATIONS, STILL_VALID
from tests.helpers.fuzz.pieces import PieceEncoder, header_pieces, join
from tests.helpers.fuzz.schemas import request_schemas
from tests.helpers.fuzz.values import CODEC, Profile, requests

VALID = "valid"
#: Mutants of each kind per valid request: drawing the request costs more than mutating it.
MUTANTS_PER_KIND = 3


@dataclass(frozen=True)
class FuzzCase:
    api_key: int
    version: int
    correlation_id: int
    #: ``VALID`` or a name from ``mutations.MUTATIONS``.
    mutation: str
    #: The request frame without its size prefix: header and body.
    frame: bytes
    #: The request a valid frame decodes to (None for a mutated one).
    expected: Any = None

    def describe(self) -> str:
        name = request_schemas()[self.api_key].name
        return f"{name} v{self.version} {self.mutation}: {self.frame.hex()}"


@st.composite
def case_groups(
    draw: st.DrawFn, pairs: list[tuple[int, int]], profile: Profile = CODEC
) -> list[FuzzCase]:
    """One valid request of an (API key, version) from ``pairs``, then each mutation of it
    that finds something to aim at."""
    api_key, version = draw(st.sampled_from(pairs))
    schema = request_schemas()[api_key]
    value = draw(requests(api_key, version, profile))
    correlation_id = draw(st.integers(0, 2**31 - 1))
    client_id = draw(st.none() | st.sampled_from(["fuzz", ""]) | st.text(max_size=8))
    pieces = header_pieces(
        api_key, version, correlation_id, client_id, flexible=schema.flexible(version)
    )
    pieces += PieceEncoder(schema, version).request(value)
    cases = [FuzzCase(api_key, version, correlation_id, VALID, join(pieces), value)]
    for name, mutate in MUTATIONS.items():
        for _ in range(MUTANTS_PER_KIND):
            mutated = mutate(pieces, draw)
            if mutated is None:
                break
            expected = value if name in STILL_VALID else None
            cases.append(FuzzCase(api_key, version, correlation_id, name, mutated, expected))
    return cases
