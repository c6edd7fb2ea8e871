"""Where kpybroker's time goes when it misses a target: py-spy, and Python's import timer.

A workload is re-run against a fresh kpybroker with ``py-spy record``
attached (sampling, non-blocking, so the broker runs at nearly full speed).
Only samples of a thread holding the GIL count (``--gil``): uvloop releases
it while it waits in ``epoll``, which py-spy's own idle detection does not
see. The samples are of wall-clock time, so a system call during which the
thread was preempted counts in full: on two cores, a response's ``writev``
wakes the client's thread, which often takes the CPU from the broker until it
has read the answer. Each sample is charged to the layer of its innermost
Python frame; a sample whose innermost frame is the event loop's own
(``asyncio`` runner frames) is time in uvloop's C code: socket reads and
writes, the loop itself.
Startup is profiled with ``python -X importtime``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from benchlib.brokers import bytecode_env

SAMPLE_RATE = 200
TOP = 12

#: (path fragment of the innermost frame's file, layer), first match wins.
LAYERS: tuple[tuple[str, str], ...] = (
    ("kpybroker/server/", "server: connection, dispatch"),
    ("kpybroker/protocol/messages/", "generated codecs"),
    ("kpybroker/protocol/", "protocol: framing, records, CRC"),
    ("kpybroker/apis/", "API handlers"),
    ("kpybroker/cluster/", "partitions"),
    ("kpybroker/log/", "log: segments, indexes"),
    ("kpybroker/coordinator/", "group coordinator"),
    ("kpybroker/transaction_coordinator/", "transaction coordinator"),
    ("kpybroker/share_partitions/", "share partitions: acquisition, acknowledgement"),
    ("kpybroker/share_coordinator/", "share coordinator: share-group state"),
    ("kpybroker/", "kpybroker, other"),
    ("asyncio/", "event loop and socket I/O (uvloop, C)"),
    ("", "other Python"),
)

#: Files of the frames every sample starts with (the interpreter, ``asyncio.run``, the
#: ``kpybroker`` command): left out of the "including callees" ranking, which they would top.
ENTRY_FILES = ("<frozen runpy>", "asyncio/runners.py", "kpybroker/__main__.py", "kpybroker/cli.py")

_FRAME = re.compile(r"^(?P<function>.*) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


def py_spy() -> str | None:
    """The py-spy executable, or None (it comes with ``pip install -e '.[bench]'``)."""
    return shutil.which("py-spy")


@dataclass(frozen=True)
class Profile:
    """A summary of one py-spy recording."""

    title: str
    samples: int
    seconds: float
    by_layer: list[tuple[str, int]]
    top_self: list[tuple[str, int]]
    top_inclusive: list[tuple[str, int]]

    @property
    def gil_share(self) -> float:
        """Samples over the samples a thread holding the GIL throughout would give."""
        return self.samples / (SAMPLE_RATE * self.seconds) if self.seconds else 0.0


@contextlib.contextmanager
def recording(pid: int, output: Path) -> Iterator[None]:
    """Sample ``pid`` with py-spy while the block runs; write collapsed stacks to ``output``."""
    executable = py_spy()
    if executable is None:
        raise RuntimeError("py-spy is not installed: pip install -e '.[bench]'")
    proc = subprocess.Popen(
        [
            executable, "record",
            "--pid", str(pid),
            "--rate", str(SAMPLE_RATE),
            "--format", "raw",
            "--function",
            "--nonblocking",
            "--gil",
            "--output", str(output),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    time.sleep(0.5)  # let it attach before the workload starts
    try:
        yield
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        if not output.exists():
            raise RuntimeError(f"py-spy wrote no profile: {err.decode(errors='replace')[-2000:]}")


def frame_name(frame: str) -> tuple[str, str]:
    """``(readable name, file)`` of a py-spy frame ``function (path:line)``."""
    m = _FRAME.match(frame)
    if m is None:
        return frame, ""
    path = m.group("file")
    package = path.rfind("kpybroker/")
    short = path[package:] if package >= 0 else path.split("site-packages/")[-1]
    line = f":{m.group('line')}" if m.group("line") else ""
    return f"{m.group('function')} ({short}{line})", path


def layer_of(path: str) -> str:
    return next(layer for fragment, layer in LAYERS if fragment in path)


def summarize(raw: Path, title: str, seconds: float) -> Profile:
    """Read py-spy's collapsed stacks (``frame;frame;... count`` per line)."""
    layers: Counter[str] = Counter()
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [frame_name(f) for f in stack.split(";")]
        total += count
        leaf_name, leaf_path = frames[-1]
        own[leaf_name] += count
        layers[layer_of(leaf_path)] += count
        for name in {name for name, path in frames if not path.endswith(ENTRY_FILES)}:
            inclusive[name] += count
    return Profile(
        title=title,
        samples=total,
        seconds=seconds,
        by_layer=layers.most_common(),
        top_self=own.most_common(TOP),
        top_inclusive=inclusive.most_common(TOP),
    )


@dataclass(frozen=True)
class ImportProfile:
    """``python -X importtime -m kpybroker --version``: where startup's imports go."""

    total_ms: float
    top_cumulative: list[tuple[str, float]]
    top_self: list[tuple[str, float]]


def import_profile(root: Path) -> ImportProfile:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "kpybroker", "--version"],
        capture_output=True,
        text=True,
        cwd=root,
        env=bytecode_env(dict(os.environ)),
        check=True,
    )
    rows = []  # (module, own ms, cumulative ms)
    for line in proc.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|\s+(\S+)", line)
        if m:
            rows.append((m.group(3), int(m.group(1)) / 1000, int(m.group(2)) / 1000))
    return ImportProfile(
        total_ms=sum(own for _, own, _ in rows),
        top_cumulative=sorted(((n, cum) for n, _, cum in rows), key=lambda r: -r[1])[:TOP],
        top_self=sorted(((n, own) for n, own, _ in rows), key=lambda r: -r[1])[:TOP],
    )
