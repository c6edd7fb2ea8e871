"""``__consumer_offsets`` formats and partitioning, byte for byte against Kafka 4.4.0.

The expected bytes were produced by Kafka's own generated classes
(``org.apache.kafka.coordinator.group.generated``, written with
``MessageUtil.toVersionPrefixedByteBuffer``), and the partitions by Java's
``Utils.abs(groupId.hashCode()) % 50``.
"""

from __future__ import annotations

import pytest

from kpybroker.coordinator.offsets_topic_records import (
    GroupRecord,
    OffsetAndMetadata,
    OffsetRecord,
    decode_batch,
    decode_record,
    encode_batch,
    encode_record,
)
from kpybroker.coordinator.partitioning import java_string_hash, partition_for
from kpybroker.protocol.messages.group_metadata_value import GroupMetadataValue, MemberMetadata

OFFSET_KEY = "000100086d792d67726f757000066f726465727300000007"
OFFSET_VALUE_V3 = "000300000000000004d20000000500046d6574610000018bcfe56800"
OFFSET_VALUE_V1 = "000100000000000000010000000000000000000a0000000000000014"
GROUP_KEY = "000200086d792d67726f7570"
GROUP_VALUE_V3 = (
    "00030008636f6e73756d657200000003000572616e676500026d310000018bcfe568010000000100026d31"
    "00026931000163000a2f3132372e302e302e31000493e00000afc80000000201020000000103"
)

GROUP_VALUE = GroupMetadataValue(
    protocol_type="consumer",
    generation=3,
    protocol="range",
    leader="m1",
    current_state_timestamp=1_700_000_000_001,
    members=[
        MemberMetadata(
            member_id="m1",
            group_instance_id="i1",
            client_id="c",
            client_host="/127.0.0.1",
            rebalance_timeout=300_000,
            session_timeout=45_000,
            subscription=b"\x01\x02",
            assignment=b"\x03",
        )
    ],
)


def test_offset_commit_record_matches_kafka() -> None:
    value = OffsetAndMetadata(1234, 5, "meta", 1_700_000_000_000)
    key, data, *_ = encode_record(OffsetRecord("my-group", "orders", 7, value))
    assert (key.hex(), data.hex()) == (OFFSET_KEY, OFFSET_VALUE_V3)
    assert decode_record(key, data) == OffsetRecord("my-group", "orders", 7, value)


def test_explicit_retention_is_written_as_value_v1() -> None:
    value = OffsetAndMetadata(1, -1, "", 10, expire_timestamp=20)
    data = encode_record(OffsetRecord("my-group", "orders", 7, value)).value
    assert data.hex() == OFFSET_VALUE_V1
    assert decode_record(bytes.fromhex(OFFSET_KEY), data).value == value


def test_group_metadata_record_matches_kafka() -> None:
    key, data, *_ = encode_record(GroupRecord("my-group", GROUP_VALUE))
    assert (key.hex(), data.hex()) == (GROUP_KEY, GROUP_VALUE_V3)
    assert decode_record(key, data) == GroupRecord("my-group", GROUP_VALUE)


def test_tombstones_and_foreign_keys() -> None:
    key, value, *_ = encode_record(GroupRecord("my-group", None))
    assert value is None and decode_record(key, None) == GroupRecord("my-group", None)
    assert decode_record(bytes.fromhex(OFFSET_KEY), None).value is None
    # Record types that are not ours (4: the partition metadata Kafka 4.1 retired; 9 and
    # up: share and streams groups) are skipped.
    assert decode_record(b"\x00\x04\x00\x01g", b"\x00\x00") is None
    assert decode_record(b"\x00\x09\x00\x01g", b"\x00\x00") is None


def test_a_batch_round_trips() -> None:
    records = [
        OffsetRecord("g", "t", 0, OffsetAndMetadata(1, -1, "", 5)),
        GroupRecord("g", GROUP_VALUE),
        OffsetRecord("g", "t", 0, None),
    ]
    assert list(decode_batch(bytes(encode_batch(records, compression=1)))) == records


@pytest.mark.parametrize(
    ("group", "java_hash", "partition"),
    [
        ("my-group", -1906497762, 12),
        ("test-group", 627841412, 12),
        ("consumer-1", -166239206, 6),
        ("g😀", 1871882, 32),  # a surrogate pair: two UTF-16 code units
        ("polygenelubricants", -(2**31), 0),  # Utils.abs(Integer.MIN_VALUE) is 0
    ],
)
def test_partition_for_group_matches_kafka(group: str, java_hash: int, partition: int) -> None:
    assert java_string_hash(group) == java_hash
    assert partition_for(group, 50) == partition
