"""Each scenario against Apache Kafka and kpybroker; differences fail unless allowlisted.

Both brokers' observations are written to ``<results>/observations/<scenario>.json``
(``COMPAT_ARTIFACTS``), so a run answers "what does Kafka do here?" even
where the two agree.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from kpybroker.apis import all_apis

from . import (  # noqa: F401  (register the scenarios)
    authentication,
    authorization,
    consumer_groups,
    error_paths,
    scenarios,
    share_groups,
    transactions,
    whole_answers,
)
from .allowlist import compare, judge, load
from .nullable import NOT_ON_ONE_NODE, NULLABLE, nullable_fields, observed
from .probe import ABSENT, SCENARIOS, SECURED, Probe
from .secured import PairedBroker, SecuredPair, secured_pair

ALLOWED = load()


def artifacts() -> Path:
    return Path(os.environ.get("COMPAT_ARTIFACTS", "."))


@pytest.fixture(scope="session")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredPair]:
    """The secured pair, started by the first security scenario of the run (``secured.py``)."""
    target = os.environ.get("COMPAT_TARGET", "kpybroker")
    with secured_pair(tmp_path_factory.mktemp("secured"), artifacts(), target) as pair:
        yield pair


def observe(name: str, broker: str | PairedBroker, scenario: str) -> Probe:
    if isinstance(broker, PairedBroker):
        probe = Probe(name, broker.bootstrap, secured=broker)
    else:
        probe = Probe(name, broker)
    try:
        SCENARIOS[scenario](probe)
    except Exception as exc:
        raise AssertionError(
            f"scenario {scenario} failed against {name} after {len(probe.observed)} "
            f"observations: {type(exc).__name__}: {exc}\n"
            f"observed so far: {json.dumps(probe.observed, indent=1)[-3000:]}"
        ) from exc
    finally:
        probe.close()
    return probe


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_same_as_kafka(scenario: str, request: pytest.FixtureRequest) -> None:
    reference: str | PairedBroker
    target: str | PairedBroker
    if scenario in SECURED:
        pair: SecuredPair = request.getfixturevalue("secured")
        reference, target = pair.kafka, pair.target
    else:
        reference = request.getfixturevalue("reference_bootstrap")
        target = request.getfixturevalue("bootstrap")
    kafka_probe = observe("Apache Kafka", reference, scenario)
    kpy_probe = observe("kpybroker", target, scenario)
    kafka, kpy = kafka_probe.observed, kpy_probe.observed
    out = artifacts() / "observations" / f"{scenario}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"kafka": kafka, "kpybroker": kpy}, indent=1, ensure_ascii=False))

    unexplained, stale = judge(scenario, compare(scenario, kafka, kpy, ABSENT), ALLOWED)
    lines = [f"  {d.describe()}" for d in unexplained]
    lines += [f"  stale allowlist entry (no longer differs): {a.describe()}" for a in stale]
    assert not lines, (
        f"{len(unexplained)} unexplained difference(s) from Apache Kafka, {len(stale)} stale "
        f"allowlist entr(y/ies) (allowlist.toml):\n" + "\n".join(lines)
    )
    unseen = [
        f"  {api} {path}"
        for (api, path), where in NULLABLE.items()
        if where == scenario
        for probe in (kafka_probe, kpy_probe)
        if not observed(probe.answered, api, path)
    ]
    assert not unseen, "nullable fields nullable.py assigns here went unobserved:\n" + "\n".join(
        unseen
    )


def test_every_nullable_field_is_compared() -> None:
    """Each nullable response field of every served version has a scenario (nullable.py)."""
    wanted = set(nullable_fields(all_apis().values()))
    listed = set(NULLABLE) | set(NOT_ON_ONE_NODE)
    assert not wanted - listed, f"nullable fields no scenario compares: {sorted(wanted - listed)}"
    assert not listed - wanted, f"listed fields that are not nullable: {sorted(listed - wanted)}"
    unknown = {s for s in NULLABLE.values() if s not in SCENARIOS}
    assert not unknown, f"nullable.py names scenarios that do not exist: {unknown}"
