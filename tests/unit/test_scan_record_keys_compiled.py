"""The compiled walk of ``records.scan_record_keys`` (``_record_walks.scan_keys``) against
its Python walk (``records.scan_section_keys_python``), on valid and mutated sections.

The compiled walk answers the Python walk's result, or None to leave the section to it:
always where the Python walk raises, and only there or where an offset or its delta lies
beyond 64 bits."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kpybroker.protocol import compiled
from kpybroker.protocol.records import BatchKeys, InvalidRecordError, scan_section_keys_python
from tests.helpers.record_sections import mutated_sections

INT64 = range(-(2**63), 2**63)


def python_outcome(section: bytes, count: int, base_offset: int) -> BatchKeys | str:
    """The Python walk's keys, or its refusal's message."""
    try:
        return scan_section_keys_python(section, count, base_offset)
    except InvalidRecordError as error:
        return error.message


@pytest.mark.skipif(
    compiled.walks is None, reason="the extension was not built, or KPYBROKER_PURE_PYTHON=1"
)
@settings(max_examples=1500, derandomize=True, deadline=None)
@given(
    mutated_sections(),
    st.sampled_from([0, 0, -1, 1]),
    st.sampled_from([0, 10**12, 2**63 - 100, -(2**63)]),
)
def test_the_compiled_scan_gives_the_python_result_or_leaves_it_to_python(
    case: tuple[bytes, int], count_change: int, base_offset: int
) -> None:
    section, records = case
    count = max(0, records + count_change)
    python = python_outcome(section, count, base_offset)
    scanned = compiled.walks.scan_keys(section, count, base_offset)
    if isinstance(python, str):
        assert scanned is None
    elif scanned is None:
        assert any(o not in INT64 or o - base_offset not in INT64 for o in python.offsets)
    else:
        assert BatchKeys(*scanned) == python
