"""The four client quota managers of a broker, and how an entity's configs reach them.

Kafka's ``QuotaFactory.QuotaManagers`` and, for config changes, its ``QuotaConfigHandler``:
an entity's quota configs are always handled whole (the znode's full property set), each
manager getting the entity's value of its own key, or a removal when the key is absent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kpybroker.config.quota_table import (
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
)
from kpybroker.quotas.client_quota_manager import ClientQuotaManager, RequestQuotaManager
from kpybroker.quotas.controller_mutation_quota import ControllerMutationQuotaManager
from kpybroker.quotas.entity import ClientQuotaEntity
from kpybroker.quotas.settings import QuotaSettings


@dataclass(frozen=True, slots=True)
class QuotaManagers:
    produce: ClientQuotaManager
    fetch: ClientQuotaManager
    request: RequestQuotaManager
    controller_mutation: ControllerMutationQuotaManager

    @classmethod
    def from_settings(cls, settings: QuotaSettings) -> QuotaManagers:
        window = settings.client_window
        return cls(
            produce=ClientQuotaManager(window),
            fetch=ClientQuotaManager(window),
            request=RequestQuotaManager(window),
            controller_mutation=ControllerMutationQuotaManager(settings.controller_window),
        )

    def update_entity(self, entity: ClientQuotaEntity, configs: Mapping[str, str]) -> None:
        """Apply the whole quota config of ``entity``, as stored (values are text).

        The byte rates are Java longs, the others doubles, parsed as Kafka parses them;
        a key left out removes that quota. Raises ``ValueError`` for an unparsable value
        (the store only holds values that were validated when written).
        """
        self.produce.update_quota(entity, _long(configs.get(PRODUCER_BYTE_RATE)))
        self.fetch.update_quota(entity, _long(configs.get(CONSUMER_BYTE_RATE)))
        self.request.update_quota(entity, _double(configs.get(REQUEST_PERCENTAGE)))
        self.controller_mutation.update_quota(
            entity, _double(configs.get(CONTROLLER_MUTATION_RATE))
        )


def _long(value: str | None) -> float | None:
    if value is None:
        return None
    number = int(value)  # Long.parseLong: no fraction, no exponent
    if not -(1 << 63) <= number < (1 << 63):
        raise ValueError(f'For input string: "{value}"')
    return float(number)


def _double(value: str | None) -> float | None:
    return None if value is None else float(value)
