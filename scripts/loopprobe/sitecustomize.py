"""Names what holds a kpybroker's event loop: samples its main thread's stack while the loop lags.

The broker runs on uvloop, whose callbacks asyncio's debug mode cannot time, and the
canary of ``scripts/fuzz`` only says *that* an answer was late. Put this directory first
on ``PYTHONPATH``: a broker started with it (the brokers a script starts inherit it) runs
a watchdog thread that posts a no-op to the loop every 10 ms. While one waits 40 ms or
more, the thread records the main thread's stack (each distinct stack once per stall),
and at the end of a stall of 50 ms or more one ``STALL`` line; collections of 20 ms or
more are logged as ``GC`` lines, as ``scripts/gcprobe`` does. Everything goes to the file
``LOOPPROBE_FILE`` names (standard error without it)::

    LOOPPROBE_FILE=/tmp/loop.txt PYTHONPATH=scripts/loopprobe:. \\
        scripts/fuzz --codec-cases 0 --frames 20000 --seed 4343
    scripts/loopprobe/summary /tmp/loop.txt

A stall with no sample is one where the watchdog itself got no CPU or no interpreter
lock (a collection, a loaded machine). What it found is in docs/fuzzing.md.
"""

import gc
import os
import sys
import threading
import time
import traceback

POLL_S = 0.01
SAMPLE_AFTER_S = 0.04
STALL_S = 0.05
GC_S = 0.02
STACK_DEPTH = 12


def _is_broker() -> bool:
    return "kpybroker" in " ".join(sys.argv[:2])


def _write(text: str) -> None:
    path = os.environ.get("LOOPPROBE_FILE")
    if path is None:
        sys.stderr.write(text)
        return
    with open(path, "a") as out:
        out.write(text)


_collection_started = [0.0]


def _on_collection(phase: str, info: dict) -> None:
    if phase == "start":
        _collection_started[0] = time.perf_counter()
        return
    took = time.perf_counter() - _collection_started[0]
    if took >= GC_S and _is_broker():
        _write(f"GC {time.monotonic():.3f} gen{info['generation']} {took * 1000:.0f}ms\n")


def _watch(loop, main_thread: int) -> None:
    """Post a no-op, and while it waits, sample the main thread's stack."""
    waiting = {"since": None}

    def beat() -> None:
        waiting["since"] = None

    while not loop.is_closed():
        posted = waiting["since"] = time.monotonic()
        try:
            loop.call_soon_threadsafe(beat)
        except RuntimeError:  # closed meanwhile
            return
        sampled: set[str] = set()
        while waiting["since"] is not None:
            time.sleep(POLL_S)
            lag = time.monotonic() - posted
            frame = sys._current_frames().get(main_thread)
            if lag >= SAMPLE_AFTER_S and frame is not None:
                stack = "".join(traceback.format_stack(frame)[-STACK_DEPTH:])
                if stack not in sampled:
                    sampled.add(stack)
                    _write(f"LAG {time.monotonic():.3f} lag={lag * 1000:.0f}ms\n{stack}\n")
        lag = time.monotonic() - posted
        if lag >= STALL_S:
            now = time.monotonic()
            _write(f"STALL {now:.3f} total={lag * 1000:.0f}ms samples={len(sampled)}\n")


def _watched(new_event_loop):
    def new_loop():
        loop = new_event_loop()
        if _is_broker():
            args = (loop, threading.get_ident())
            threading.Thread(target=_watch, args=args, name="loopprobe", daemon=True).start()
        return loop

    return new_loop


gc.callbacks.append(_on_collection)
try:
    import uvloop
except ImportError:  # the broker then runs asyncio's loop
    pass
else:
    uvloop.new_event_loop = _watched(uvloop.new_event_loop)
