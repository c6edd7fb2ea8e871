"""The broker's resident memory and open file descriptors, sampled, and their trends.

A leak shows as a slope: memory or descriptors that keep growing while the load
stays the same. Each kill -9 starts a fresh process, so a slope is fitted per
process lifetime (an incarnation) as well as over the whole run.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median

from tests.helpers.process import open_fds, rss_bytes


@dataclass(frozen=True, slots=True)
class Sample:
    seconds: float  # since the run started
    pid: int
    rss_bytes: int
    open_fds: int


def sample(pid: int, seconds: float) -> Sample | None:
    """One sample of process ``pid``; None when it is gone (killed between two looks)."""
    try:
        return Sample(seconds, pid, rss_bytes(pid), open_fds(pid))
    except (FileNotFoundError, ProcessLookupError):
        return None


def slope_per_hour(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of ``(seconds, value)`` points, per hour; None below 3 points."""
    if len(points) < 3:
        return None
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    spread = sum((t - mean_t) ** 2 for t, _ in points)
    if spread == 0:
        return None
    return 3600 * sum((t - mean_t) * (v - mean_v) for t, v in points) / spread


def trends(samples: list[Sample]) -> dict[str, float | None]:
    """RSS (MiB/h) and descriptor (per hour) slopes: the median over incarnations, and over
    the whole run."""
    by_pid: dict[int, list[Sample]] = {}
    for s in samples:
        by_pid.setdefault(s.pid, []).append(s)

    def per_incarnation(value: str, scale: float) -> float | None:
        slopes = [
            slope_per_hour([(s.seconds, getattr(s, value) / scale) for s in run])
            for run in by_pid.values()
        ]
        known = [s for s in slopes if s is not None]
        return median(known) if known else None

    mib = 1024 * 1024
    return {
        "rss_mib_per_hour_per_incarnation": per_incarnation("rss_bytes", mib),
        "fds_per_hour_per_incarnation": per_incarnation("open_fds", 1),
        "rss_mib_per_hour_whole_run": slope_per_hour(
            [(s.seconds, s.rss_bytes / mib) for s in samples]
        ),
        "fds_per_hour_whole_run": slope_per_hour([(s.seconds, s.open_fds) for s in samples]),
    }
