"""What the share-state shard asks its runtime to do: plain data, carried out in order.

- ``reply(token, answer)`` completes a waiting request (at most once per token).
- ``append(records, on_done)`` writes records to the shard's partition of
  ``__share_group_state`` as one batch. Once the log has taken the batch, the
  runtime replays each record into the shard at its offset (so the shard's
  state is always what its log replays to, as in Kafka's runtime, which
  applies records when it writes them); ``on_done(effects, error)`` runs once
  every in-sync replica has the batch, or the write failed (then nothing was
  replayed unless the log had taken it, as when replication times out).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kpybroker.protocol.errors import ErrorCode
from kpybroker.share_coordinator.share_state_records import ShareRecord

Token = int


@dataclass(frozen=True, slots=True, eq=False)
class Append:
    records: Sequence[ShareRecord]
    on_done: Callable[[Effects, ErrorCode], None]


@dataclass(slots=True)
class Effects:
    replies: list[tuple[Token, Any]] = field(default_factory=list)
    appends: list[Append] = field(default_factory=list)

    def reply(self, token: Token | None, result: Any) -> None:
        if token is not None:
            self.replies.append((token, result))

    def append(
        self, records: Sequence[ShareRecord], on_done: Callable[[Effects, ErrorCode], None]
    ) -> None:
        self.appends.append(Append(records, on_done))
