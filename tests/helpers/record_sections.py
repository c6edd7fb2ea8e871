"""Records sections (a batch's records, decompressed) for the walks over them, and a
hypothesis strategy of valid and mutated ones: the differential tests of the compiled
walks (``kpybroker/protocol/_record_walks.c``) against the Python ones draw from it."""

from __future__ import annotations

from hypothesis import strategies as st

from kpybroker.protocol.records import (
    BATCH_HEADER_SIZE,
    NewRecord,
    Record,
    build_batch,
    build_retained_batch,
    parse_header,
)


def section_of(records: list[NewRecord], deltas: list[int] | None = None) -> bytes:
    """The uncompressed records section of ``records``, with ``deltas`` as offset deltas."""
    batch = build_batch(records)
    if deltas is not None:
        moved = [
            Record(d, 0, r.key, r.value, r.headers) for d, r in zip(deltas, records, strict=True)
        ]
        batch = build_retained_batch(parse_header(batch), moved)
    return batch[BATCH_HEADER_SIZE:]


@st.composite
def mutated_sections(draw: st.DrawFn) -> tuple[bytes, int]:
    """A section of a few random records (null, empty and long keys and values, headers),
    then maybe mutated: bytes overwritten or deleted, including runs of continuation bytes
    (long and non-canonical varints); with the number of records it was built from."""
    records = draw(
        st.lists(
            st.builds(
                NewRecord,
                st.none() | st.binary(max_size=200),
                st.none() | st.binary(max_size=300),
                st.lists(
                    st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=20)), max_size=3
                ).map(tuple),
                st.just(0),
            ),
            min_size=1,
            max_size=80,
        )
    )
    section = bytearray(section_of(records))
    for _ in range(draw(st.integers(0, 3))):
        position = draw(st.integers(0, len(section)))
        patch = draw(
            st.binary(min_size=1, max_size=4) | st.sampled_from([b"\x80\x00", b"\xff" * 10])
        )
        if draw(st.booleans()):
            section[position : position + len(patch)] = patch
        else:
            del section[position : position + len(patch)]
    return bytes(section), len(records)
