"""Which ``__consumer_offsets`` partition coordinates a group, exactly as Kafka decides.

Kafka takes ``Utils.abs(groupId.hashCode()) % partitions`` (GroupCoordinatorService
.partitionFor): Java's ``String.hashCode`` over UTF-16 code units, and an
absolute value that maps Integer.MIN_VALUE to 0. Masking with 0x7fffffff would
send every group with a negative hash to another partition than Kafka does,
and a data directory written by one broker would then be misread by the other.
"""

from __future__ import annotations

_INT_MIN = -(2**31)


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: ``s[0]*31^(n-1) + ... + s[n-1]`` in int32 arithmetic."""
    data = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition of ``group_id`` among ``partitions``."""
    h = java_string_hash(group_id)
    return (0 if h == _INT_MIN else abs(h)) % partitions
