"""The machine, and one process's CPU time and memory, read from ``/proc``.

CPU time is ``utime + stime`` of ``/proc/<pid>/stat`` (every thread of the
process: the JVM's GC and network threads count for Kafka, as the event loop
does for kpybroker), so the CPU a broker spends on a workload is the
difference across it. Memory is the resident set, ``VmRSS``.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
from dataclasses import dataclass

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds the process has used so far."""
    with open(f"/proc/{pid}/stat") as f:
        text = f.read()
    # The command name (field 2) may hold spaces; the fields after its ')' are fixed.
    fields = text[text.rindex(")") + 2 :].split()
    utime, stime = int(fields[11]), int(fields[12])
    return (utime + stime) / CLOCK_TICKS


def rss_bytes(pid: int) -> int:
    """The process's resident set size."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise ValueError(f"no VmRSS for pid {pid}")


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
