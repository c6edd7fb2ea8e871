"""The cleaner's offset map: a batch put at once is the same as its keys put one by one,
and the question the rewrite asks of it (is any key's latest record in this range?)."""

import random

from kpybroker.log.offset_map import ENTRY_OVERHEAD, OffsetMap


def test_put_all_is_put_one_at_a_time_up_to_where_the_map_fills() -> None:
    rng = random.Random(7)
    for _ in range(300):
        budget = rng.randint(ENTRY_OVERHEAD, 40 * ENTRY_OVERHEAD)
        whole, single = OffsetMap(budget, 1.0), OffsetMap(budget, 1.0)
        offset = 0
        while True:
            # Repeated keys, inside a batch and across batches; keys of several lengths.
            keys = [rng.randbytes(rng.randint(0, 2)) * rng.randint(1, 4) for _ in range(20)]
            offsets = list(range(offset, offset + len(keys)))
            offset += len(keys)
            filled = not whole.put_all(keys, offsets)
            refused = False
            for key, record_offset in zip(keys, offsets, strict=True):
                if single.full:
                    refused = True
                    break
                single.put(key, record_offset)
            assert whole._offsets == single._offsets
            assert (whole._used, whole.latest_offset) == (single._used, single.latest_offset)
            assert filled == refused
            if filled:
                break


def test_maps_none_between_answers_only_inside_the_mapped_section() -> None:
    offset_map = OffsetMap(1 << 20, 1.0, start=10)
    assert offset_map.put_all([b"a", b"b", b"a"], [10, 11, 12])
    assert offset_map.put_all([b"c", b"b"], [13, 20])
    offset_map.update_latest_offset(25)
    # The latest offsets are a@12, c@13 and b@20.
    assert offset_map.maps_none_between(10, 11)
    assert not offset_map.maps_none_between(10, 12)
    assert offset_map.maps_none_between(14, 19)
    assert not offset_map.maps_none_between(14, 20)
    assert offset_map.maps_none_between(21, 25)
    assert not offset_map.maps_none_between(9, 9)  # below the first dirty offset
    assert not offset_map.maps_none_between(21, 26)  # past what was mapped
    offset_map.put(b"d", 16)
    assert not offset_map.maps_none_between(14, 19)  # a put after the first question counts
    offset_map.records_within_batches = False
    assert not offset_map.maps_none_between(21, 25)
