"""The configured quotas of one quota type, and which of them applies to a client.

Kafka's ``DefaultQuotaCallback`` (inside ``ClientQuotaManager``). A client is a user name
(the principal's name, whatever its type) and a client id; the most specific configured
entity wins, in this order:

1. ``<user, client-id>``            5. ``<default user, default client-id>``
2. ``<user, default client-id>``    6. ``<default user>``
3. ``<user>``                       7. ``<client-id>``
4. ``<default user, client-id>``    8. ``<default client-id>``

The winner also decides which clients share one measured rate. A client is metered under
*metric tags* ``(user, client_id)`` where "" stands for "any": under a ``<user>`` quota all
the user's client ids share ``(user, "")``, under a ``<client-id>`` quota every user of the
id shares ``("", client_id)``. When quotas of one kind only are configured (the usual case)
the tags follow from the kind alone, without looking anything up; with several kinds, the
precedence above picks them. The quota's bound is then looked up from the tags.

A user or client id of "" is Kafka's "absent": it matches no named entity.
"""

from __future__ import annotations

from collections import Counter
from enum import Enum

from kpybroker.quotas.entity import DEFAULT, ClientQuotaEntity, EntityPart

#: ``(user, client_id)`` under which a client is metered; "" is "any".
MetricTags = tuple[str, str]

_Key = tuple[EntityPart, EntityPart]


class _Kind(Enum):
    """The entity levels, whose mix selects how metric tags are chosen."""

    CLIENT_ID = "client-id"
    USER = "user"
    USER_CLIENT_ID = "user and client-id"


def _kind(key: _Key) -> _Kind:
    user, client_id = key
    if user is None:
        return _Kind.CLIENT_ID
    return _Kind.USER if client_id is None else _Kind.USER_CLIENT_ID


class QuotaOverrides:
    """Configured bounds of one quota type by entity, and their resolution for a client.

    Like Kafka 4.x, which counts configured entities per kind, removing the last quota of
    a kind falls back to the cheaper tag selection of the kinds that remain.
    """

    __slots__ = ("_kinds", "_quotas")

    def __init__(self) -> None:
        self._quotas: dict[_Key, float] = {}
        self._kinds: Counter[_Kind] = Counter()

    @property
    def enabled(self) -> bool:
        """Whether any quota of this type is configured (else nothing need be metered)."""
        return bool(self._quotas)

    def set(self, entity: ClientQuotaEntity, bound: float | None) -> None:
        """Configure ``entity``'s bound, or remove it with None."""
        key = (entity.user, entity.client_id)
        if bound is None:
            if self._quotas.pop(key, None) is not None:
                self._kinds[_kind(key)] -= 1
                self._kinds = +self._kinds  # forget kinds down to zero
        else:
            if key not in self._quotas:
                self._kinds[_kind(key)] += 1
            self._quotas[key] = bound

    def get(self, entity: ClientQuotaEntity) -> float | None:
        """The bound configured for exactly ``entity``."""
        return self._quotas.get((entity.user, entity.client_id))

    def quota_for(self, user: str, client_id: str) -> float | None:
        """The bound that applies to this client; None: unlimited."""
        return self.limit(self.metric_tags(user, client_id))

    def metric_tags(self, user: str, client_id: str) -> MetricTags:
        """The tags ``(user, client_id)`` this client is metered under (Kafka's
        ``quotaMetricTags``)."""
        kinds = self._kinds
        if len(kinds) <= 1:
            if _Kind.USER in kinds:
                return user, ""
            if _Kind.USER_CLIENT_ID in kinds:
                return user, client_id
            return "", client_id  # client-id quotas, or none at all
        quotas = self._quotas
        if (user, client_id) in quotas or (user, DEFAULT) in quotas:
            return user, client_id
        if (user, None) in quotas:
            return user, ""
        if (DEFAULT, client_id) in quotas or (DEFAULT, DEFAULT) in quotas:
            return user, client_id
        if (DEFAULT, None) in quotas:
            return user, ""
        return "", client_id

    def limit(self, tags: MetricTags) -> float | None:
        """The bound of the metered group ``tags``; None: unlimited (Kafka's ``quotaLimit``)."""
        user, client_id = tags
        get = self._quotas.get
        if user and client_id:
            bound = get((user, client_id))
            if bound is None:
                bound = get((user, DEFAULT))
            if bound is None:
                bound = get((DEFAULT, client_id))
            if bound is None:
                bound = get((DEFAULT, DEFAULT))
            return bound
        if user:
            bound = get((user, None))
            return get((DEFAULT, None)) if bound is None else bound
        if client_id:
            bound = get((None, client_id))
            return get((None, DEFAULT)) if bound is None else bound
        return None
