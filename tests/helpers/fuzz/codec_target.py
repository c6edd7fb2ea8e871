"""The codecs in process: every case decoded as the server decodes a request frame.

Pass criteria: a valid frame (and one with unknown tags) decodes to the request
it was made from; any other frame decodes or raises one of the errors the
server answers by closing the connection (``dispatch.MALFORMED``), never
another exception; a frame claiming a huge array allocates in proportion to
its own size, not to the claim. The record batches of a decoded Produce request
go through the broker's batch checks and record decoding, which may raise only
``KafkaError`` (answered as a partition error).
"""

from __future__ import annotations

import math
import tracemalloc
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kpybroker.log.log_config import LogConfig
from kpybroker.log.produce_validator import CheckedBatch, validate_records
from kpybroker.protocol.errors import KafkaError
from kpybroker.protocol.framing import parse_request_header, peek_api
from kpybroker.protocol.messages import SCHEMAS
from kpybroker.protocol.records import (
    BATCH_HEADER_SIZE,
    iter_record_keys,
    iter_records,
    validate_batch,
)
from kpybroker.server.dispatch import MALFORMED
from tests.helpers.fuzz.cases import Finding, FuzzCase, draw_cases
from tests.helpers.fuzz.schemas import all_versions

PRODUCE_KEY = 0
#: Bytes a decode may allocate beyond this multiple of the frame's size.
ALLOCATION_SLACK = 1024 * 1024
ALLOCATION_FACTOR = 64
#: Mutants of each kind per valid request: drawing the request costs more than mutating it.
MUTANTS_PER_KIND = 3
#: Cases per hypothesis example, about (a valid frame and its mutants).
CASES_PER_EXAMPLE = 20


@dataclass
class CodecReport:
    cases: Counter[str] = field(default_factory=Counter)
    #: The malformed-frame exceptions, by type.
    errors: Counter[str] = field(default_factory=Counter)
    findings: list[Finding] = field(default_factory=list)
    #: Batches already checked (header, CRC included, and length): the bombs recur, and
    #: each costs a decompression of tens of megabytes.
    checked_batches: set[bytes] = field(default_factory=set)

    @property
    def total(self) -> int:
        return sum(self.cases.values())


def decode(frame: bytes) -> Any:
    """Decode a request frame as ``dispatch.answer`` does (after its API checks)."""
    api_key, version, _ = peek_api(frame)
    codec = SCHEMAS.get(api_key)
    if codec is None:
        return None
    header = parse_request_header(frame)
    request_class = getattr(codec, codec.NAME + "Request")
    request, _ = request_class.decode(frame, header.body_offset, version)
    return request


def check_records(records: Any) -> None:
    """The broker's checks of a produced batch (its records walked, as on produce), then
    its records decoded."""
    try:
        header = validate_batch(records)
        validate_records(CheckedBatch(records, header, True), LogConfig())
        list(iter_records(records))
        list(iter_record_keys(records))
    except KafkaError:
        pass


def produced_batches(request: Any) -> list[Any]:
    return [
        partition.records
        for topic in request.topic_data
        for partition in topic.partition_data
        if partition.records is not None
    ]


def check(case: FuzzCase, report: CodecReport) -> Finding | None:
    """Decode ``case``; the Finding that breaks the pass criteria, or None."""
    measure = case.mutation == "huge_count"
    if measure:
        tracemalloc.start()
    try:
        request = decode(case.frame)
    except MALFORMED as exc:
        report.errors[type(exc).__name__] += 1
        if case.expected is not None:
            return Finding(case, f"a valid frame failed to decode: {exc!r}")
        return None
    except Exception as exc:  # any other exception is the finding
        return Finding(case, f"unclassified {type(exc).__name__}: {exc}")
    finally:
        if measure:
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
    if measure and peak > ALLOCATION_SLACK + ALLOCATION_FACTOR * len(case.frame):
        return Finding(case, f"decoding allocated {peak} bytes for a {len(case.frame)}-byte frame")
    if case.expected is not None and request != case.expected:
        return Finding(case, f"decoded {request!r}, expected {case.expected!r}")
    if case.api_key == PRODUCE_KEY and request is not None and case.expected is not None:
        for records in produced_batches(request):
            identity = bytes(records[:BATCH_HEADER_SIZE]) + len(records).to_bytes(4, "big")
            if identity in report.checked_batches:
                continue
            report.checked_batches.add(identity)
            try:
                check_records(records)
            except Exception as exc:  # any exception but KafkaError is the finding
                return Finding(case, f"batch check raised {type(exc).__name__}: {exc}")
    return None


def run(
    cases: int,
    seed: int,
    *,
    collect: bool = False,
    pairs: list[tuple[int, int]] | None = None,
) -> CodecReport:
    """Decode at least ``cases`` cases, spread evenly over ``pairs`` (default: every API key
    and version). A finding fails at once (hypothesis then shrinks it to a minimal frame),
    or with ``collect`` is kept in the report and fuzzing goes on."""
    report = CodecReport()
    pairs = pairs or all_versions()

    def decode_group(group: list[FuzzCase]) -> None:
        for case in group:
            finding = check(case, report)
            if finding is not None and not collect:
                raise AssertionError(str(finding))
            report.cases[case.mutation] += 1
            if finding is not None:
                report.findings.append(finding)

    rounds = math.ceil(cases / (CASES_PER_EXAMPLE * len(pairs)))
    draw_cases(pairs, rounds, seed, decode_group, mutants_per_kind=MUTANTS_PER_KIND)
    return report
