"""Each scenario against Apache Kafka and kpybroker; differences fail unless allowlisted.

Both brokers' observations are written to ``<results>/observations/<scenario>.json``
(``COMPAT_ARTIFACTS``), so a run answers "what does Kafka do here?" even
where the two agree.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from . import error_paths, scenarios  # noqa: F401  (register the scenarios)
from .allowlist import compare, judge, load
from .probe import ABSENT, SCENARIOS, Probe

ALLOWED = load()


def observe(name: str, bootstrap: str, scenario: str) -> dict:
    probe = Probe(name, bootstrap)
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
    return probe.observed


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_same_as_kafka(scenario: str, bootstrap: str, reference_bootstrap: str) -> None:
    kafka = observe("Apache Kafka", reference_bootstrap, scenario)
    kpy = observe("kpybroker", bootstrap, scenario)
    out = Path(os.environ.get("COMPAT_ARTIFACTS", ".")) / "observations" / f"{scenario}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"kafka": kafka, "kpybroker": kpy}, indent=1, ensure_ascii=False))

    unexplained, stale = judge(scenario, compare(scenario, kafka, kpy, ABSENT), ALLOWED)
    lines = [f"  {d.describe()}" for d in unexplained]
    lines += [f"  stale allowlist entry (no longer differs): {a.describe()}" for a in stale]
    assert not lines, (
        f"{len(unexplained)} unexplained difference(s) from Apache Kafka, {len(stale)} stale "
        f"allowlist entr(y/ies) (allowlist.toml):\n" + "\n".join(lines)
    )
