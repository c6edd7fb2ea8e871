"""Share sessions (KIP-932): which partitions a member fetches from, and the epoch it is at.

A share consumer opens a session with its first ShareFetch to a broker
(epoch 0, naming the partitions it wants), then sends only changes: each
request names partitions to add and ``forgotten_topics_data`` to drop, with
the next epoch (1, 2, … wrapping to 1 after the largest int32). Epoch -1
closes the session; what the member still holds is then released, as it is
when the connection of the member's latest request closes (Kafka 4.1+). Kafka's
``ShareSessionCache``; one session per (group, member), at most
``group.share.max.share.sessions`` on a broker.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from kpybroker.protocol.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INT32_MAX = 2**31 - 1


class SessionPartition(NamedTuple):
    topic_id: bytes
    partition: int


class SessionKey(NamedTuple):
    group_id: str
    member_id: str


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= INT32_MAX else epoch + 1


@dataclass(slots=True)
class ShareSession:
    key: SessionKey
    #: The epoch the member's next request must carry.
    epoch: int = 1
    #: In the order they were added (a dict keeps it).
    partitions: dict[SessionPartition, None] = field(default_factory=dict)
    #: The connection of the member's latest request: the session ends with it.
    connection_id: str = ""


class SessionError(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


class ShareSessions:
    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self.sessions: dict[SessionKey, ShareSession] = {}

    def open(
        self, key: SessionKey, partitions: Iterable[SessionPartition], connection_id: str = ""
    ) -> tuple[ShareSession, ShareSession | None]:
        """A new session (epoch 0): the session, and the one it replaces (to release)."""
        replaced = self.sessions.pop(key, None)
        if len(self.sessions) >= self.max_sessions:
            if replaced is not None:
                self.sessions[key] = replaced
            raise SessionError(ErrorCode.SHARE_SESSION_LIMIT_REACHED)
        session = ShareSession(
            key, partitions=dict.fromkeys(partitions), connection_id=connection_id
        )
        self.sessions[key] = session
        return session, replaced

    def advance(
        self,
        key: SessionKey,
        epoch: int,
        added: Iterable[SessionPartition] = (),
        forgotten: Iterable[SessionPartition] = (),
    ) -> ShareSession:
        """A request inside a session: checks its epoch, applies its changes, moves it on."""
        session = self.get(key, epoch)
        for tp in added:
            session.partitions.setdefault(tp, None)
        for tp in forgotten:
            session.partitions.pop(tp, None)
        session.epoch = next_epoch(epoch)
        return session

    def get(self, key: SessionKey, epoch: int) -> ShareSession:
        session = self.sessions.get(key)
        if session is None:
            raise SessionError(ErrorCode.SHARE_SESSION_NOT_FOUND)
        if epoch != session.epoch:
            raise SessionError(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        return session

    def close(self, key: SessionKey) -> ShareSession:
        """Epoch -1: the session ends (SHARE_SESSION_NOT_FOUND if there is none)."""
        session = self.sessions.pop(key, None)
        if session is None:
            raise SessionError(ErrorCode.SHARE_SESSION_NOT_FOUND)
        return session

    def of_group(self, group_id: str) -> list[ShareSession]:
        return [s for s in self.sessions.values() if s.key.group_id == group_id]

    def drop_connection(self, connection_id: str) -> list[ShareSession]:
        """The sessions whose member's connection closed, ended."""
        gone = [s for s in self.sessions.values() if s.connection_id == connection_id]
        for session in gone:
            del self.sessions[session.key]
        return gone
