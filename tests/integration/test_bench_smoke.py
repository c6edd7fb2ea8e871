"""``scripts/bench --quick``, end to end: a smoke test of the benchmark, never of its figures.

The benchmark (issue 7) is not a test and has no thresholds here. This checks
that the one command still starts both brokers, runs every workload against
each, prints the ratios and writes the document (and its chart, when
matplotlib from the ``bench`` extra is installed), so that it keeps working.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.process import REPO_ROOT

#: Four minutes: it starts ahead of the other files (tests/conftest.py).
pytestmark = pytest.mark.starts_first

WORKLOADS = (
    "5 startup",
    "1 ProducerPerformance",
    "2 ConsumerPerformance",
    "3 EndToEndLatency",
    "4 confluent-kafka",
    "5 scale",
    "6 ProducerPerformance, transactional",
    "7 ConsumerPerformance, read_committed",
    "8 ProducerPerformance, secured",
    "9 ConsumerPerformance, secured",
    "10 consumer group rebalance",
    "11 share-group consume",
    "12 small requests",
    "13 fan-out",
    "14 start-up",
    "15 replicated",
    "16 recovery",
    "17 compaction",
)


@pytest.mark.timeout(720)
def test_quick_run_measures_both_brokers_and_writes_the_doc(tmp_path: Path) -> None:
    command = [sys.executable, str(REPO_ROOT / "scripts" / "bench"), "--quick", "--no-profile"]
    command += ["--output", str(tmp_path)]
    with_chart = importlib.util.find_spec("matplotlib") is not None
    if not with_chart:
        command.append("--no-chart")
    result = subprocess.run(command, capture_output=True, text=True, timeout=690, cwd=REPO_ROOT)
    assert result.returncode == 0, f"{result.stdout[-5000:]}\n{result.stderr[-15000:]}"

    table = result.stdout
    for workload in WORKLOADS:
        assert workload in table, f"no {workload} row in the printed table:\n{table}"
    doc = (tmp_path / "performance.md").read_text()
    raw = doc.split("## Raw samples", 1)[1]
    rows = [line for line in raw.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert rows, doc
    for row in rows:
        kpybroker, kafka = (cell.strip() for cell in row.strip("|").split("|")[3:5])
        assert kpybroker and kafka, f"a figure is missing for one broker: {row}"
    for section in ("## Results", "## Machine", "## Versions and settings", "## Method"):
        assert section in doc
    if with_chart:
        assert (tmp_path / "performance.png").read_bytes().startswith(b"\x89PNG")


def test_profile_summary_charges_each_sample_to_its_innermost_layer(tmp_path: Path) -> None:
    """The py-spy summary the doc shows for missed targets (collapsed stacks in, shares out)."""
    sys.path.insert(0, str(REPO_ROOT / "scripts"))
    try:
        from benchlib import profiling
    finally:
        sys.path.remove(str(REPO_ROOT / "scripts"))
    raw = tmp_path / "raw.txt"
    loop = "run (asyncio/runners.py:118);Runner.run (asyncio/runners.py:86)"
    serve = f"{loop};KafkaConnection.serve (/x/kpybroker/server/connection.py:87)"
    raw.write_text(
        f"{loop} 6\n{serve};Segment.append (/x/kpybroker/log/segment.py:138) 3\n{serve} 1\n"
    )
    profile = profiling.summarize(raw, "title", seconds=0.1)
    assert profile.samples == 10
    assert dict(profile.by_layer) == {
        "event loop and socket I/O (uvloop, C)": 6,
        "log: segments, indexes": 3,
        "server: connection, dispatch": 1,
    }
    assert profile.top_self[0] == ("Runner.run (asyncio/runners.py:86)", 6)
    assert ("KafkaConnection.serve (kpybroker/server/connection.py:87)", 4) in (
        profile.top_inclusive
    )


@pytest.mark.parametrize("counting", [[], ["--uncounted"]], ids=["counted", "uncounted"])
def test_request_path_bench_prints_both_figures(counting: list[str]) -> None:
    """``scripts/bench_request_path.py`` (a request's CPU in process, quoted by
    ``docs/performance-ceilings.md``) still runs; its figures are not checked."""
    command = [sys.executable, str(REPO_ROOT / "scripts" / "bench_request_path.py")]
    command += ["--requests", "200", "--connections", "20", *counting]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr[-5000:]
    assert "answer():" in result.stdout
    assert "the connection path:" in result.stdout


def test_the_report_says_whether_a_miss_is_inside_the_rounds_spread() -> None:
    sys.path.insert(0, str(REPO_ROOT / "scripts"))
    try:
        from benchlib.results import KAFKA, KPYBROKER, Better, Metric, Results
        from benchlib.variance import miss_note, variance_lines
    finally:
        sys.path.remove(str(REPO_ROOT / "scripts"))
    near = Metric("1 w", "near", "throughput", "records/s", Better.HIGHER, ratio_target=True)
    far = Metric("1 w", "far", "throughput", "records/s", Better.HIGHER, ratio_target=True)
    memory = Metric("5 w", "c", "RSS", "kB", Better.LOWER, ratio_target=True, target_ratio=0.5)
    start = Metric("14 w", "warm", "start", "s", Better.LOWER, limit=0.15)
    results = Results()
    for metric, ours, theirs in (
        (near, [80, 100], [90, 120]),
        (far, [50, 60], [90, 100]),
        (memory, [4, 5], [0.2, 0.7]),
        (start, [0.14, 0.2], [2.5, 2.6]),
    ):
        for value in ours:
            results.add(metric, KPYBROKER, value)
        for value in theirs:
            results.add(metric, KAFKA, value)
    notes = {row.metric.case: miss_note(results, row) for row in results.missed()}
    assert set(notes) == {"near", "far", "c", "warm"}
    assert notes["near"].endswith("(100) against Kafka's worst (90): inside the rounds' spread.")
    assert notes["far"].endswith("(60) against Kafka's worst (90): outside the rounds' spread.")
    assert "against the target at Kafka's worst (0.35): outside" in notes["c"]
    assert notes["warm"] == " Its best round took 0.14 s: inside the rounds' spread."
    section = "\n".join(variance_lines(results))
    # kpybroker: 22%, 18%, 22%, 35%; Kafka: 29%, 11%, 111%, 4%.
    assert "The median spread was 22% for kpybroker and 20% for Kafka." in section
    assert "3 of kpybroker's figures and 2 of Kafka's spread by more than 20%" in section
    assert section.index("| 5 w | c | RSS | 22% | 111% |") < section.index("| 14 w | warm |")
