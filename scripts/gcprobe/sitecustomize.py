"""Logs Python's garbage collections that take 20 ms or more.

Put this directory first on ``PYTHONPATH``: every Python process started with it (and
the brokers a script starts, which inherit it) appends a line per such collection to
the file ``GCPROBE_FILE`` names (standard error without it)::

    GCPROBE 4242 kpybroker gen2 3466 ms collected=0 objects=1180976

(the process id and the module or script it runs; ``objects``: the objects the
collector tracks, counted only after a pause of 200 ms or more, since counting costs a
pass of its own). For example::

    GCPROBE_FILE=/tmp/gc.txt PYTHONPATH=scripts/gcprobe:. \\
        python scripts/bench_partition_creation.py --partitions 20000 --topics 2 \\
        --target kpybroker --traffic
    grep kpybroker /tmp/gc.txt

What it measured is in docs/partition-creation.md ("What held the event loop").
"""

import gc
import os
import sys
import time

_started = [0.0]
_program = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"


def _write(line: str) -> None:
    path = os.environ.get("GCPROBE_FILE")
    if path is None:
        sys.stderr.write(line)
        return
    with open(path, "a") as out:
        out.write(line)


def _on_collection(phase: str, info: dict) -> None:
    if phase == "start":
        _started[0] = time.perf_counter()
        return
    took = time.perf_counter() - _started[0]
    if took >= 0.02:
        objects = len(gc.get_objects()) if took >= 0.2 else -1
        program = "kpybroker" if "kpybroker" in " ".join(sys.argv[:2]) else _program
        _write(
            f"GCPROBE {os.getpid()} {program} gen{info['generation']} {took * 1000:.0f} ms "
            f"collected={info['collected']} objects={objects}\n"
        )


gc.callbacks.append(_on_collection)
