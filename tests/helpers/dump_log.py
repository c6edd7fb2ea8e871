"""Kafka's ``kafka-dump-log.sh`` (``DumpLogSegments``) over a log directory, and its output parsed.

One JVM run reads many files (``--files a,b,c``), so a test pays the JVM start
once per set of options. The parsers pick the facts out of its output that a
test compares with what it produced: records per ``.log`` file, the producer
entries of ``.snapshot`` files, the aborted transactions of ``.txnindex`` files.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.java import run_java
from tests.helpers.process import ToolResult

DUMP_LOG_SEGMENTS = "org.apache.kafka.tools.DumpLogSegments"

#: The suffixes DumpLogSegments reads (any other file it reports as "Ignoring unknown file").
DUMPABLE_SUFFIXES = (".log", ".index", ".timeindex", ".snapshot", ".txnindex")

#: Words that, in its output, report a problem (its own counters print to stderr with them).
PROBLEM_WORDS = re.compile(
    r"exception|error|mismatch|corrupt|invalid bytes|isvalid: false|not found in the log"
    r"|out of order|unknown",
    re.IGNORECASE,
)


def segment_files(log_dir: Path, suffixes: Iterable[str] = DUMPABLE_SUFFIXES) -> list[Path]:
    """Every file of the partition directories of ``log_dir`` with one of ``suffixes``."""
    wanted = tuple(suffixes)
    return sorted(
        path
        for path in log_dir.glob("*-*/*")
        if path.is_file() and path.name.endswith(wanted) and path.name.split(".")[0].isdigit()
    )


def dump_log_segments(lib: Path, files: Iterable[Path], *options: str) -> ToolResult:
    """Run DumpLogSegments over ``files`` with ``options``; the run's result, unchecked."""
    paths = ",".join(str(path) for path in files)
    return run_java(lib, DUMP_LOG_SEGMENTS, ["--files", paths, *options], timeout=300, heap="512m")


def dumped_sections(stdout: str) -> dict[Path, list[str]]:
    """The output lines of each file, keyed by the path of its ``Dumping <path>`` line."""
    sections: dict[Path, list[str]] = {}
    current: list[str] = []
    for line in stdout.splitlines():
        if line.startswith("Dumping "):
            current = sections.setdefault(Path(line.removeprefix("Dumping ")), [])
        else:
            current.append(line)
    return sections


#: Kafka 4.4's DumpLogSegments reports the first record of every ``.log`` file that does
#: not start at offset 0 as following offset -1 (its Java port lost the Scala version's
#: "first record" case), for Kafka's own files as much as for anyone's: not a problem.
_FIRST_RECORD_PAIR = re.compile(r"^\s+-1 is followed by \d+$")
_GAPS_HEADER = "Non-consecutive offsets in "


def problem_lines(result: ToolResult, gaps_allowed: re.Pattern[str] | None = None) -> list[str]:
    """The lines of stdout and stderr that report a problem.

    Offset gaps ("Non-consecutive offsets in <file>", then indented pairs) count
    but for the pair of a file's first record, and for files ``gaps_allowed``
    matches (a compacted log has holes).
    """
    problems = []
    gaps_file: str | None = None
    for line in (result.stdout + "\n" + result.stderr).splitlines():
        if gaps_file is not None and line.startswith(" "):
            allowed = gaps_allowed is not None and gaps_allowed.search(gaps_file)
            if not allowed and not _FIRST_RECORD_PAIR.match(line):
                problems.append(f"{gaps_file}: {line.strip()}")
            continue
        gaps_file = line.removeprefix(_GAPS_HEADER) if line.startswith(_GAPS_HEADER) else None
        if gaps_file is None and PROBLEM_WORDS.search(line):
            problems.append(line)
    return problems


@dataclass(frozen=True)
class DumpedRecord:
    """One ``| offset: ...`` line of a deep iteration."""

    offset: int
    key: str | None
    payload: str | None
    control: bool


_FIELD = re.compile(r"(\w+): (\S*)")
_RECORD = re.compile(r"^\| offset: (?P<offset>\d+) ")


def records_of(lines: Iterable[str]) -> Iterator[DumpedRecord]:
    """The records of one ``.log`` file's section (``--deep-iteration --print-data-log``)."""
    for line in lines:
        match = _RECORD.match(line)
        if match is None:
            continue
        key = re.search(r" key: (\S*)", line)
        payload = re.search(r" payload: (.*)$", line)
        yield DumpedRecord(
            int(match.group("offset")),
            key.group(1) if key else None,
            payload.group(1) if payload else None,
            "endTxnMarker:" in line,
        )


def batches_of(lines: Iterable[str]) -> list[dict[str, str]]:
    """The fields of each batch line (``baseOffset: ... isvalid: true``) of a ``.log`` section."""
    return [dict(_FIELD.findall(line)) for line in lines if line.startswith("baseOffset: ")]


def fields_of(lines: Iterable[str]) -> list[dict[str, str]]:
    """The ``name: value`` fields of each line: a ``.snapshot`` or ``.txnindex`` section."""
    return [dict(_FIELD.findall(line)) for line in lines if ": " in line]
