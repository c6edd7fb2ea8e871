"""Fuzz cases: a valid request frame of some API key and version, and its mutations."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import seed as with_seed
from hypothesis import strategies as st

from tests.helpers.fuzz.mutations import MUTATIONS, STILL_VALID
from tests.helpers.fuzz.pieces import PieceEncoder, header_pieces, join
from tests.helpers.fuzz.schemas import request_schemas
from tests.helpers.fuzz.values import CODEC, Profile, requests

VALID = "valid"
#: (API key, version) pairs drawn in one hypothesis example.
PAIRS_PER_EXAMPLE = 8


@dataclass(frozen=True)
class FuzzCase:
    api_key: int
    version: int
    #: ``VALID`` or a name from ``mutations.MUTATIONS``.
    mutation: str
    #: The request frame without its size prefix: header and body.
    frame: bytes
    #: The request a valid frame decodes to (None for a mutated one).
    expected: Any = None

    def describe(self) -> str:
        name = request_schemas()[self.api_key].name
        return f"{name} v{self.version} {self.mutation}: {self.frame.hex()}"


@dataclass(frozen=True)
class Finding:
    """A case that broke a target's pass criteria, and how."""

    case: FuzzCase
    problem: str

    def __str__(self) -> str:
        return f"{self.problem}\n    {self.case.describe()}"


@st.composite
def case_groups(
    draw: st.DrawFn,
    pair: tuple[int, int],
    profile: Profile = CODEC,
    mutants_per_kind: int = 1,
) -> list[FuzzCase]:
    """One valid request of ``pair``'s API key and version, then up to ``mutants_per_kind``
    mutants of each kind that finds something to aim at in it."""
    api_key, version = pair
    schema = request_schemas()[api_key]
    value = draw(requests(api_key, version, profile))
    correlation_id = draw(st.integers(0, 2**31 - 1))
    client_id = draw(st.none() | st.sampled_from(["fuzz", ""]) | st.text(max_size=8))
    pieces = header_pieces(
        api_key, version, correlation_id, client_id, flexible=schema.flexible(version)
    )
    pieces += PieceEncoder(schema, version).request(value)
    cases = [FuzzCase(api_key, version, VALID, join(pieces), value)]
    for name, mutate in MUTATIONS.items():
        for _ in range(mutants_per_kind):
            mutated = mutate(pieces, draw)
            if mutated is None:
                break
            expected = value if name in STILL_VALID else None
            cases.append(FuzzCase(api_key, version, name, mutated, expected))
    return cases


def draw_cases(
    pairs: list[tuple[int, int]],
    rounds: int,
    seed: int,
    sink: Callable[[list[FuzzCase]], None],
    *,
    profile: Profile = CODEC,
    mutants_per_kind: int = 1,
) -> None:
    """Hand ``sink`` a case group of every pair, ``rounds`` times over (and once more:
    hypothesis starts with the simplest example of all).

    Each hypothesis example draws a group for each of ``PAIRS_PER_EXAMPLE`` pairs:
    drawing the pair itself would spread them very unevenly (hypothesis mutates the
    examples it already has, pair included), and more pairs would overrun the
    choices one example may make.
    """
    for start in range(0, len(pairs), PAIRS_PER_EXAMPLE):
        chosen = pairs[start : start + PAIRS_PER_EXAMPLE]
        _draw_slice(chosen, rounds + 1, seed * 1_000_003 + start, sink, profile, mutants_per_kind)


def _draw_slice(
    pairs: list[tuple[int, int]],
    examples: int,
    seed: int,
    sink: Callable[[list[FuzzCase]], None],
    profile: Profile,
    mutants_per_kind: int,
) -> None:
    @with_seed(seed)
    @settings(
        max_examples=examples,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.data())
    def fuzz(data: st.DataObject) -> None:
        for pair in pairs:
            sink(data.draw(case_groups(pair, profile, mutants_per_kind)))

    fuzz()
