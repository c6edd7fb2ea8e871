"""Who a client quota applies to: a user, a client id, or both, each possibly the default.

Kafka keys client quotas by ``<user>``, ``<client-id>`` or ``<user, client-id>``, where
either part may be the default entity ("any user" / "any client id"). Here entities hold
the real names and a distinct ``DEFAULT`` marker, so that a user really called
``<default>`` never stands for the default. Where they are stored, and how names are
written there, is ``metadata/entity_configs.py``'s business: :meth:`ClientQuotaEntity.of`
converts from its entities.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from kpybroker.metadata.entity_configs import CLIENT_ID, USER, Entity

#: How a default entity prints (its znode name).
DEFAULT_NAME = "<default>"


class DefaultEntity(Enum):
    """The default user or client id, as opposed to one named so."""

    DEFAULT = DEFAULT_NAME

    def __repr__(self) -> str:
        return DEFAULT_NAME


DEFAULT = DefaultEntity.DEFAULT

#: A user or client id part of an entity: a name, the default, or None (not part of it).
EntityPart = str | DefaultEntity | None


@dataclass(frozen=True, slots=True)
class ClientQuotaEntity:
    """``<user>``, ``<client-id>`` or ``<user, client-id>``; either may be ``DEFAULT``."""

    user: EntityPart = None
    client_id: EntityPart = None

    def __post_init__(self) -> None:
        if self.user is None and self.client_id is None:
            raise ValueError("a client quota entity names a user, a client id, or both")

    @classmethod
    def of(cls, entity: Entity) -> ClientQuotaEntity:
        """The quota entity of a stored config entity (None names are the default)."""
        parts = dict(entity)
        return cls(_part(parts, USER), _part(parts, CLIENT_ID))


def _part(parts: dict[str, str | None], kind: str) -> EntityPart:
    if kind not in parts:
        return None
    name = parts[kind]
    return DEFAULT if name is None else name
