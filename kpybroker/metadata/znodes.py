"""Where cluster metadata lives in the store, and how each znode is encoded.

The znodes and their payloads are those of Kafka 3.x in ZooKeeper mode
(``kafka.zk.ZkData``), compact JSON as Jackson wrote it, so that Kafka's
tooling and habits for reading ZooKeeper apply unchanged:

==============================================  ====================================
``/cluster/id``                                 ``{"version":"1","id":"<22 chars>"}``
``/controller`` (ephemeral)                     ``{"version":2,"brokerid":0,
                                                "timestamp":"<ms>","kraftControllerEpoch":-1}``
``/controller_epoch``                           the epoch as decimal text
``/brokers/ids/<id>`` (ephemeral)               broker registration, JSON version 5
``/brokers/topics/<topic>``                     ``{"version":3,"topic_id":..,"partitions":
                                                {"0":[0]},"adding_replicas":{},
                                                "removing_replicas":{}}``
``/brokers/topics/<t>/partitions/<p>/state``    ``{"controller_epoch":1,"leader":0,
                                                "version":1,"leader_epoch":0,"isr":[0]}``
``/config/topics/<topic>``                      ``{"version":1,"config":{..}}``
``/config/brokers/<id>``, ``<default>``         the same, dynamic broker configs
``/config/groups/<group>``                      the same: a group's configs (KIP-848)
``/config/users/<user>``                        the same: a user's quotas and its
                                                SCRAM credentials
``/config/users/<user>/clients/<client-id>``    the same: quotas of a user's client
``/config/clients/<client-id>``                 the same: quotas of a client id
``/config/ips/<address>``                       the same: connection rate quotas
==============================================  ====================================

Users, client ids and groups appear in paths as Kafka's ``Sanitizer`` writes them
(URL-encoded; a group named ``.`` or ``..`` has its dots encoded too, which ZooKeeper
needs), and ``<default>`` names the default entity of each kind. Kafka keeps group configs
only in KRaft's metadata log; their znode follows the layout of the other entities.

This module is that layout and nothing else: the paths, and for each znode a
pure encode and decode between its bytes and the values of ``model``. Keeping
the wire format of the store in one place lets it be checked against Kafka's
``ZkData`` on its own, and keeps JSON out of the cache and the writes
(``cluster_metadata``) that use it. Decoders raise ``ValueError``,
``KeyError``, ``TypeError`` or ``AttributeError`` (``DECODE_ERRORS``) on a
malformed payload.
"""

from __future__ import annotations

import functools
import json
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote_plus

from kpybroker.metadata.model import (
    RECOVERED,
    BrokerRegistration,
    Endpoint,
    PartitionState,
    uuid_from_str,
    uuid_to_str,
)
from kpybroker.metadata.store import NodeStat

__all__ = [
    "BROKER_CONFIGS_PATH",
    "BROKER_IDS_PATH",
    "CLIENTS_CONFIG_PATH",
    "CLUSTER_ID_PATH",
    "CONTAINER_PATHS",
    "CONTROLLER_EPOCH_PATH",
    "CONTROLLER_PATH",
    "DECODE_ERRORS",
    "DEFAULT_BROKER_ENTITY",
    "DEFAULT_ENTITY",
    "ENTITY_CONFIG_PATHS",
    "GROUP_CONFIGS_PATH",
    "IPS_CONFIG_PATH",
    "TOPICS_PATH",
    "TOPIC_CONFIGS_PATH",
    "USERS_CONFIG_PATH",
    "USER_CLIENTS",
    "TopicNode",
    "decode_broker",
    "decode_cluster_id",
    "decode_config",
    "decode_controller",
    "decode_controller_epoch",
    "decode_state_entry",
    "decode_topic",
    "desanitize",
    "encode_broker",
    "encode_cluster_id",
    "encode_config",
    "encode_controller",
    "encode_controller_epoch",
    "encode_state",
    "encode_topic",
    "group_entity",
    "group_of_entity",
    "partition_path",
    "partition_state_path",
    "sanitize",
    "topic_path",
]

CLUSTER_ID_PATH = "/cluster/id"
CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
BROKER_IDS_PATH = "/brokers/ids"
TOPICS_PATH = "/brokers/topics"
TOPIC_CONFIGS_PATH = "/config/topics"
BROKER_CONFIGS_PATH = "/config/brokers"
GROUP_CONFIGS_PATH = "/config/groups"
CONTAINER_PATHS = (
    BROKER_IDS_PATH,
    TOPICS_PATH,
    TOPIC_CONFIGS_PATH,
    BROKER_CONFIGS_PATH,
    GROUP_CONFIGS_PATH,
)
"""Parents that must exist so that child watches on them can be set (Kafka's PersistentZkPaths)."""

DEFAULT_BROKER_ENTITY = "<default>"
"""Config entity of the cluster-wide dynamic broker configs (Kafka's ConfigEntityName.Default)."""
DEFAULT_ENTITY = DEFAULT_BROKER_ENTITY
"""The default user, client id or address of quota configs (the same ``<default>``)."""
USERS_CONFIG_PATH = "/config/users"
CLIENTS_CONFIG_PATH = "/config/clients"
IPS_CONFIG_PATH = "/config/ips"
ENTITY_CONFIG_PATHS = (USERS_CONFIG_PATH, CLIENTS_CONFIG_PATH, IPS_CONFIG_PATH)
USER_CLIENTS = "clients"
"""The child of a user's config znode under which its client ids' configs are."""

DECODE_ERRORS = (ValueError, KeyError, TypeError, AttributeError)
"""What a decoder raises on a malformed payload."""


# -- paths ---------------------------------------------------------------------


def topic_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}"


def partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{partition_path(topic, partition)}/state"


# -- znode payloads --------------------------------------------------------------


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _now_ms() -> str:
    return str(time.time_ns() // 1_000_000)


def encode_cluster_id(cluster_id: str) -> bytes:
    return _json({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return str(json.loads(data)["id"])


def encode_controller(broker_id: int) -> bytes:
    return _json(
        {
            "version": 2,
            "brokerid": broker_id,
            "timestamp": _now_ms(),
            "kraftControllerEpoch": -1,
        }
    )


def decode_controller(data: bytes) -> int:
    return int(json.loads(data)["brokerid"])


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes) -> int:
    return int(data)


def encode_broker(endpoints: Sequence[Endpoint], rack: str | None) -> bytes:
    """Version 5 of BrokerIdZNode; like Kafka, host/port name the first PLAINTEXT endpoint
    (for very old clients) and ``rack`` is omitted when there is none."""
    plaintext = next((e for e in endpoints if e.security_protocol == "PLAINTEXT"), None)
    payload: dict[str, Any] = {
        "features": {},
        "listener_security_protocol_map": {e.listener: e.security_protocol for e in endpoints},
        "endpoints": [e.connection_string for e in endpoints],
    }
    if rack is not None:
        payload["rack"] = rack
    payload |= {
        "jmx_port": -1,
        "host": None if plaintext is None else plaintext.host,
        "port": -1 if plaintext is None else plaintext.port,
        "timestamp": _now_ms(),
        "version": 5,
    }
    return _json(payload)


def _parse_endpoint(text: str, protocols: Mapping[str, str]) -> Endpoint:
    listener, _, address = text.partition("://")
    host, _, port = address.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return Endpoint(listener, host, int(port), protocols.get(listener, listener))


def decode_broker(name: str, data: bytes, stat: NodeStat) -> BrokerRegistration:
    info = json.loads(data)
    protocols = info.get("listener_security_protocol_map") or {}
    endpoints = tuple(_parse_endpoint(text, protocols) for text in info["endpoints"])
    return BrokerRegistration(int(name), endpoints, info.get("rack"), stat.czxid)


@dataclass(frozen=True, slots=True)
class TopicNode:
    """A topic znode as decoded: its topic id, replica assignment (with a reassignment's
    adding and removing replicas) and znode version, to compare-and-set on."""

    topic_id: uuid.UUID
    replicas: Mapping[int, tuple[int, ...]]
    adding: Mapping[int, tuple[int, ...]]
    removing: Mapping[int, tuple[int, ...]]
    version: int


def encode_topic(
    topic_id: uuid.UUID,
    assignment: Mapping[int, Sequence[int]],
    adding: Mapping[int, Sequence[int]] | None = None,
    removing: Mapping[int, Sequence[int]] | None = None,
) -> bytes:
    """Version 3 of Kafka's TopicZNode; a reassignment's adding and removing replicas are
    listed for the partitions that have them."""

    def listing(replicas: Mapping[int, Sequence[int]] | None) -> dict[str, list[int]]:
        return {str(p): list(r) for p, r in sorted((replicas or {}).items()) if r}

    return _json(
        {
            "version": 3,
            "topic_id": uuid_to_str(topic_id),
            "partitions": listing(assignment),
            "adding_replicas": listing(adding),
            "removing_replicas": listing(removing),
        }
    )


def broker_ids(ids: Iterable[Any]) -> tuple[int, ...]:
    """A replica list or ISR as a tuple of broker ids, shared with equal ones decoded before:
    they are drawn from few brokers, so the same few tuples recur across tens of thousands
    of partitions (each distinct tuple is 48 bytes or more)."""
    return _shared(tuple(map(int, ids)))


@functools.lru_cache(maxsize=4096)
def _shared(ids: tuple[int, ...]) -> tuple[int, ...]:
    return ids


def decode_topic(name: str, data: bytes, stat: NodeStat) -> TopicNode:
    info = json.loads(data)

    def listing(key: str) -> dict[int, tuple[int, ...]]:
        return {int(p): broker_ids(b) for p, b in (info.get(key) or {}).items()}

    return TopicNode(
        uuid_from_str(info["topic_id"]),
        listing("partitions"),
        listing("adding_replicas"),
        listing("removing_replicas"),
        stat.version,
    )


def encode_state(state: PartitionState) -> bytes:
    payload: dict[str, Any] = {
        "controller_epoch": state.controller_epoch,
        "leader": state.leader,
        "version": 1,
        "leader_epoch": state.leader_epoch,
        "isr": list(state.isr),
    }
    if state.leader_recovery_state != RECOVERED:
        payload["leader_recovery_state"] = state.leader_recovery_state
    return _json(payload)


def decode_state_entry(data: bytes, stat: NodeStat) -> tuple[PartitionState, int]:
    """A state znode as cached: the state and the znode version to compare-and-set on."""
    info = json.loads(data)
    state = PartitionState(
        leader=int(info["leader"]),
        leader_epoch=int(info["leader_epoch"]),
        isr=broker_ids(info["isr"]),
        controller_epoch=int(info["controller_epoch"]),
        leader_recovery_state=int(info.get("leader_recovery_state", RECOVERED)),
    )
    return state, stat.version


def encode_config(configs: Mapping[str, str]) -> bytes:
    return _json({"version": 1, "config": dict(configs)})


def decode_config(name: str, data: bytes, stat: NodeStat) -> dict[str, str]:
    """A config znode's settings; an empty node (a parent made for a user's client ids,
    as ZooKeeper's recursive create leaves it) holds none."""
    if not data:
        return {}
    return {key: str(value) for key, value in (json.loads(data).get("config") or {}).items()}


def sanitize(name: str) -> str:
    """A user or client id as a path component: Kafka's ``Sanitizer.sanitize`` (Java's
    URLEncoder, with ``*`` and space percent-encoded too)."""
    return quote(name, safe=".-_").replace("~", "%7E")


def desanitize(component: str) -> str:
    """Kafka's ``Sanitizer.desanitize`` (Java's URLDecoder: ``+`` is a space)."""
    return unquote_plus(component, errors="strict")


def group_entity(group_id: str) -> str:
    """A group id as the name of its config znode: sanitized, with the dots of ``.`` and
    ``..`` encoded (they are not node names)."""
    if group_id in (".", ".."):
        return group_id.replace(".", "%2E")
    return sanitize(group_id)


def group_of_entity(component: str) -> str:
    """The group id of a config znode's name (``group_entity`` undone); a name that is not
    valid URL encoding (written by someone else) stands for itself."""
    try:
        return desanitize(component)
    except ValueError:
        return component
