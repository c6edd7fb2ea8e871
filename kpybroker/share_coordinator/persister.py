"""What a share partition's leader and the group coordinator ask of share state: the persister.

KIP-932 keeps the state of every share partition (its start offset and the
delivery state of the in-flight records past it) with the share coordinator,
in ``__share_group_state``, keyed by group, topic ID and partition. Kafka's
``Persister`` interface is how the share-partition leader (reading the state
when it loads a partition, writing it after every acknowledgement) and the
group coordinator (initializing a partition's state when it is first
assigned, summarizing it for DescribeShareGroupOffsets, deleting it with the
group) reach that coordinator, on this broker or another.
"""

from __future__ import annotations

import base64
import binascii
import re
from enum import IntEnum
from typing import NamedTuple, Protocol

from kpybroker.protocol.errors import ErrorCode

#: A partition whose start offset has not been decided yet: its leader applies
#: ``share.auto.offset.reset`` when it first loads it.
UNINITIALIZED_START_OFFSET = -1


class DeliveryState(IntEnum):
    """Kafka's ``RecordState`` ids; only AVAILABLE, ACKNOWLEDGED and ARCHIVED are persisted."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class StateBatch(NamedTuple):
    """Offsets ``first_offset..last_offset`` (inclusive), all in one state and delivery count."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


class PartitionState(NamedTuple):
    """One share partition's persisted state (Kafka's ``ShareGroupOffset``)."""

    state_epoch: int
    start_offset: int
    leader_epoch: int = -1
    batches: tuple[StateBatch, ...] = ()
    #: Records past the start offset already acknowledged or archived (-1: unknown).
    delivery_complete_count: int = -1


class ShareKey(NamedTuple):
    """What share state is kept per: Kafka's ``SharePartitionKey``."""

    group_id: str
    topic_id: bytes
    partition: int

    def coordinator_key(self) -> str:
        """The string hashed to a ``__share_group_state`` partition ("group:topicId:partition")."""
        return f"{self.group_id}:{uuid_string(self.topic_id)}:{self.partition}"


def uuid_string(topic_id: bytes) -> str:
    """A topic ID as Kafka prints it (URL-safe base64 without padding)."""
    return base64.urlsafe_b64encode(topic_id).decode().rstrip("=")


_JAVA_INT = re.compile(r"[+-]?[0-9]+")
#: What Java's ``String.trim`` removes: every character up to the space.
_JAVA_BLANKS = "".join(map(chr, range(33)))


def parse_share_key(text: str) -> ShareKey:
    """A "group:topicId:partition" coordinator key, checked as Kafka's
    ``SharePartitionKey.validate`` checks it (the group id trimmed); ValueError if invalid."""
    tokens = text.split(":")
    while tokens and not tokens[-1]:
        tokens.pop()  # Java's String.split drops trailing empty strings
    if len(tokens) != 3:
        raise ValueError(
            f"Invalid key format: expected - groupId:topicId:partition, found - {text}"
        )
    group_id = tokens[0].strip(_JAVA_BLANKS)
    if not group_id:
        raise ValueError("GroupId must be alphanumeric string")
    topic_id = parse_uuid(tokens[1])
    if not _JAVA_INT.fullmatch(tokens[2]) or not -(2**31) <= int(tokens[2]) < 2**31:
        raise ValueError(f"Invalid partition: {tokens[2]}")
    return ShareKey(group_id, topic_id, int(tokens[2]))


def parse_uuid(text: str) -> bytes:
    """Kafka's ``Uuid.fromString``: URL-safe base64 (padding optional) of 16 bytes."""
    if len(text) > 24:
        raise ValueError(f"Invalid topic ID: {text}")
    try:
        decoded = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"Invalid topic ID: {text}") from None
    if len(decoded) != 16:
        raise ValueError(f"Invalid topic ID: {text}")
    return decoded


class SharePersister(Protocol):
    """Kafka's ``Persister``: each call reaches the share coordinator of ``key``.

    Errors are Kafka's: COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR /
    COORDINATOR_LOAD_IN_PROGRESS when it cannot be reached yet (retried
    within the call), FENCED_STATE_EPOCH and FENCED_LEADER_EPOCH for a stale
    writer, UNKNOWN_TOPIC_OR_PARTITION for a key without state.
    """

    async def initialize(self, key: ShareKey, state_epoch: int, start_offset: int) -> ErrorCode:
        """Start (or restart, at a higher state epoch) a partition's state."""
        ...

    async def read(
        self, key: ShareKey, leader_epoch: int
    ) -> tuple[ErrorCode, PartitionState | None]:
        """The whole state, recording ``leader_epoch`` as the partition's current leader's."""
        ...

    async def write(self, key: ShareKey, state: PartitionState) -> ErrorCode:
        """Record changed batches and the start offset (merged into what is kept)."""
        ...

    async def read_summary(
        self, key: ShareKey, leader_epoch: int
    ) -> tuple[ErrorCode, PartitionState | None]:
        """The state without its batches (for DescribeShareGroupOffsets)."""
        ...

    async def delete(self, key: ShareKey) -> ErrorCode:
        """Forget the partition's state (the group or its offsets are deleted)."""
        ...
