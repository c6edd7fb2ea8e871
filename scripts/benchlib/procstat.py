"""The machine, and one process's CPU time and memory, read from ``/proc``.

CPU time is ``utime + stime`` of ``/proc/<pid>/stat`` (every thread of the
process: the JVM's GC and network threads count for Kafka, as the event loop
does for kpybroker), so the CPU a broker spends on a workload is the
difference across it. Memory is the resident set, ``VmRSS``.
"""

from __future__ import annotations

import bisect
import os
import platform
import re
import subprocess
import threading
import time
from dataclasses import dataclass
from types import TracebackType

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

#: Seconds between a ``CpuTrace``'s readings (the CPU times themselves are in clock ticks,
#: 10 ms).
TRACE_INTERVAL_S = 0.02


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds the process has used so far."""
    with open(f"/proc/{pid}/stat") as f:
        text = f.read()
    # The command name (field 2) may hold spaces; the fields after its ')' are fixed.
    fields = text[text.rindex(")") + 2 :].split()
    utime, stime = int(fields[11]), int(fields[12])
    return (utime + stime) / CLOCK_TICKS


class CpuTrace:
    """A process's CPU seconds read every ``TRACE_INTERVAL_S`` on a thread while the block
    runs, stamped with ``time.time()``: the CPU it used over a span that only a client
    knows afterwards (from the dates a tool prints)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.times: list[float] = []
        self.cpu: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cpu-trace", daemon=True)

    def _read(self) -> None:
        try:
            cpu = cpu_seconds(self.pid)
        except OSError:  # the process has exited
            return
        self.times.append(time.time())
        self.cpu.append(cpu)

    def _run(self) -> None:
        while not self._stop.wait(TRACE_INTERVAL_S):
            self._read()

    def __enter__(self) -> CpuTrace:
        self._read()
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
        self._read()

    def at(self, when: float) -> float:
        """CPU seconds at ``when`` (seconds since the epoch), interpolated between readings;
        ValueError outside the trace."""
        times = self.times
        if not times or not times[0] <= when <= times[-1]:
            raise ValueError(f"{when} is outside the trace")
        i = bisect.bisect_left(times, when)
        if times[i] == when:
            return self.cpu[i]
        t0, t1, c0, c1 = times[i - 1], times[i], self.cpu[i - 1], self.cpu[i]
        return c0 + (c1 - c0) * (when - t0) / (t1 - t0)

    def between(self, start: float, end: float) -> float:
        """CPU seconds from ``start`` to ``end`` (seconds since the epoch)."""
        return self.at(end) - self.at(start)


@dataclass(frozen=True)
class Machine:
    """What the doc says about where the numbers come from."""

    cpu_model: str
    cores: int
    memory_gib: float
    kernel: str
    python: str
    java: str
    load_average: tuple[float, float, float]

    def lines(self) -> list[str]:
        load = ", ".join(f"{x:.2f}" for x in self.load_average)
        return [
            f"CPU: {self.cpu_model}, {self.cores} cores (os.cpu_count)",
            f"Memory: {self.memory_gib:.1f} GiB",
            f"Kernel: {self.kernel}",
            f"Python: {self.python}",
            f"Java: {self.java}",
            f"Load average when the run started (1, 5, 15 min): {load}",
        ]


def cpu_model() -> str:
    """The ``model name`` of /proc/cpuinfo (the first one; they are all the same here)."""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def memory_gib() -> float:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / (1024 * 1024)
    return 0.0


def java_version(java: str) -> str:
    """First line of ``java -version`` (it prints to stderr)."""
    proc = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    lines = (proc.stderr or proc.stdout).strip().splitlines()
    return re.sub(r"\s+", " ", " / ".join(lines[:2])) if lines else "unknown"


def describe_machine(java: str) -> Machine:
    return Machine(
        cpu_model=cpu_model(),
        cores=os.cpu_count() or 0,
        memory_gib=memory_gib(),
        kernel=platform.release(),
        python=f"{platform.python_implementation()} {platform.python_version()}",
        java=java_version(java),
        load_average=os.getloadavg(),
    )
