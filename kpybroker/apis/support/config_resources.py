"""Config resources (a topic, this broker, the cluster-wide broker defaults, a group, this
broker's loggers) for the config APIs.

DescribeConfigs, AlterConfigs and IncrementalAlterConfigs name a resource by a type id
and a name. This module resolves that pair, with Kafka's error codes and messages, and
reads and replaces a resource's stored dynamic configs (the metadata store's
``/config/topics/<topic>``, ``/config/brokers/<id|<default>>`` and
``/config/groups/<group>``), validating a new set the way Kafka's controller does before
it is written. A group need not exist to be configured or described, as in Kafka. The
loggers are named here and live in ``kpybroker/config/broker_loggers.py``, not in the store.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING

from kpybroker.config import (
    BROKER_CONFIGS,
    TOPIC_CONFIGS,
    ConfigKey,
    validate_group_configs,
    validate_topic_configs,
)
from kpybroker.metadata.model import UnknownTopicError
from kpybroker.metadata.topic_names import topic_name_error
from kpybroker.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kpybroker.apis.support.context import Services


_JAVA_INT = re.compile(r"[+-]?[0-9]{1,10}")


class ResourceType(IntEnum):
    """Kafka's ``ConfigResource.Type`` ids."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


def invalid_request(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_REQUEST, message)


@dataclass(frozen=True, slots=True)
class ConfigResource:
    """A resolved resource: ``broker_id`` is None for a topic, a group and the cluster
    defaults."""

    type: ResourceType
    name: str
    broker_id: int | None = None

    @property
    def is_cluster_default(self) -> bool:
        return self.type is ResourceType.BROKER and self.broker_id is None

    def key(self, config: str) -> ConfigKey | None:
        """The table entry of ``config`` for this kind of resource, None if unknown.

        None for every group config: Kafka's controller knows no group config as a list, so
        APPEND and SUBTRACT fail on all of them ("its type is not LIST").
        """
        if self.type is ResourceType.GROUP:
            return None
        table = TOPIC_CONFIGS if self.type is ResourceType.TOPIC else BROKER_CONFIGS
        return table.get(config)

    def stored(self, services: Services) -> Mapping[str, str]:
        """The resource's dynamic configs as stored (a topic's or group's overrides; a
        broker's layer)."""
        if self.type is ResourceType.TOPIC:
            return services.cluster.topic_overrides(self.name)
        if self.type is ResourceType.GROUP:
            return services.cluster.group_config(self.name)
        return services.cluster.broker_config(self.broker_id)

    async def replace(
        self, services: Services, configs: dict[str, str], *, validate_only: bool
    ) -> None:
        """Validate ``configs`` as the resource's whole new dynamic set, then store it.

        Raises ``ConfigError`` (INVALID_CONFIG, naming the key) for an unknown key or a
        bad value, and UNKNOWN_TOPIC_OR_PARTITION for a topic that does not exist; in
        Kafka's order: the values first, then the topic's existence.
        """
        if self.type is ResourceType.TOPIC:
            validate_topic_configs(configs, services.config())
            if services.topics.get(self.name) is None:
                raise _unknown_topic(self.name)
            if not validate_only:
                try:
                    await services.cluster.set_topic_config(self.name, configs)
                except UnknownTopicError:
                    raise _unknown_topic(self.name) from None
            return
        if self.type is ResourceType.GROUP:
            validate_group_configs(configs, services.config())
            if not validate_only:
                await services.cluster.set_group_config(self.name, configs)
            return
        if self.is_cluster_default:
            services.config().with_dynamic(dynamic_default=configs)
        else:
            services.config().with_dynamic(dynamic_broker=configs)
        if not validate_only:
            await services.cluster.set_broker_config(self.broker_id, configs)


def _unknown_topic(name: str) -> KafkaError:
    return KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")


def resolve_for_describe(services: Services, type_id: int, name: str) -> ConfigResource:
    """The resource DescribeConfigs asks about (ConfigHelper's checks and messages)."""
    if type_id == ResourceType.TOPIC:
        _check_topic_name(name)
        if services.topics.get(name) is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
        return ConfigResource(ResourceType.TOPIC, name)
    if type_id == ResourceType.BROKER:
        return _broker_resource(services, name, "Broker id", " or empty string,")
    if type_id == ResourceType.GROUP:
        if not name:
            raise invalid_request("Group name must not be empty")
        return ConfigResource(ResourceType.GROUP, name)
    if type_id == ResourceType.BROKER_LOGGER:
        if not name:
            raise invalid_request("Broker id must not be empty")
        return _broker_resource(services, name, "Broker id", "", ResourceType.BROKER_LOGGER)
    raise invalid_request(f"Unsupported resource type: {_type_name(type_id)}")


def resolve_for_alter(services: Services, type_id: int, name: str) -> ConfigResource:
    """The resource an alter request changes (ConfigAdminManager's and the controller's checks)."""
    if type_id == ResourceType.TOPIC:
        if not name:
            raise invalid_request("Default topic resources are not allowed.")
        _check_topic_name(name)
        return ConfigResource(ResourceType.TOPIC, name)
    if type_id == ResourceType.BROKER:
        return _broker_resource(services, name, "Node id", ",")
    if type_id == ResourceType.GROUP:
        if not name:
            raise invalid_request("Default group resources are not allowed.")
        return ConfigResource(ResourceType.GROUP, name)
    raise invalid_request(f"Unknown resource type {type_id}")


def _broker_resource(
    services: Services,
    name: str,
    id_word: str,
    after_id: str,
    kind: ResourceType = ResourceType.BROKER,
) -> ConfigResource:
    """This broker (or its loggers) by id, or the cluster defaults for ""; Kafka words the
    APIs' messages slightly differently, hence ``id_word`` and ``after_id``."""
    if not name:
        return ConfigResource(kind, name)
    broker_id = _broker_id(name, f"{id_word} must be an integer, but it is: ")
    own = services.cluster.broker_id
    if broker_id != own:
        raise invalid_request(f"Unexpected broker id, expected {own}{after_id} but received {name}")
    return ConfigResource(kind, name, broker_id)


def check_logger_node(services: Services, name: str) -> None:
    """IncrementalAlterConfigs' check of a BROKER_LOGGER resource's name: this broker's id
    (Kafka's ``RuntimeLoggerManager.validateResourceNameIsNodeId``; "" is not an id)."""
    node_id = _broker_id(name, "Node id must be an integer, but it is: ")
    own = services.cluster.broker_id
    if node_id != own:
        raise invalid_request(f"Unexpected node id. Expected {own}, but received {node_id}")


def _check_topic_name(name: str) -> None:
    message = topic_name_error(name)
    if message is not None:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, message)


def _broker_id(name: str, message: str) -> int:
    """``name`` as Java's ``Integer.parseInt`` reads it (no spaces, no underscores)."""
    if not _JAVA_INT.fullmatch(name):
        raise invalid_request(message + name)
    return int(name)


def _type_name(type_id: int) -> str:
    try:
        return ResourceType(type_id).name
    except ValueError:
        return ResourceType.UNKNOWN.name
