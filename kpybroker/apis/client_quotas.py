"""DescribeClientQuotas (key 48) and AlterClientQuotas (key 49): quotas per user, client id
and address, as ``kafka-configs.sh --entity-type users/clients/ips`` manages them.

Both answer as Kafka 4.x does (``ClientQuotasImage.describe`` and
``ClientQuotaControlManager.alterClientQuotas``): the filter rules and their
INVALID_REQUEST messages, only entities that have a quota set, values as
doubles, and on alteration per-entity errors for a bad key, value or entity.
The quotas live with the entity's other configs (``metadata/entity_configs.py``,
Kafka's ZooKeeper layout), whole numbers written as Kafka's ZooKeeper mode wrote
them. Describing needs DESCRIBE_CONFIGS on the cluster, altering ALTER_CONFIGS.

v1 of both is the flexible version.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable, Mapping

from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.registry import api
from kpybroker.config.core import ConfigType, java_str
from kpybroker.config.quota_table import CLIENT_QUOTA_CONFIGS, IP_QUOTA_CONFIGS
from kpybroker.metadata.entity_configs import CLIENT_ID, ENTITY_TYPES, IP, USER, Entity
from kpybroker.protocol.errors import ErrorCode, KafkaError, default_message
from kpybroker.protocol.messages import alter_client_quotas, describe_client_quotas
from kpybroker.protocol.messages.alter_client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    EntityData,
    EntryResult,
)
from kpybroker.protocol.messages.describe_client_quotas import (
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
    EntryData,
    ValueData,
)
from kpybroker.protocol.messages.describe_client_quotas import EntityData as DescribedEntity
from kpybroker.security.acls.model import AclOperation

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


def invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_REQUEST, message)


# -- DescribeClientQuotas -------------------------------------------------------------


@api(describe_client_quotas, 0, 1)
async def handle_describe_client_quotas(
    ctx: RequestContext, request: DescribeClientQuotasRequest
) -> DescribeClientQuotasResponse:
    if not ctx.authorize_cluster(AclOperation.DESCRIBE_CONFIGS):
        return DescribeClientQuotasResponse(
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=None, entries=None
        )
    try:
        exact, specified = _read_filter(request)
    except KafkaError as error:
        return DescribeClientQuotasResponse(
            error_code=error.code, error_message=error.message, entries=None
        )
    entries = []
    for entity, configs in ctx.services.entity_configs:
        quotas = _quota_values(entity, configs)
        if quotas and _matches(dict(entity), exact, specified, request.strict):
            entries.append(
                EntryData(
                    entity=[DescribedEntity(kind, name) for kind, name in entity],
                    values=[ValueData(key, value) for key, value in quotas.items()],
                )
            )
    return DescribeClientQuotasResponse(error_code=ErrorCode.NONE, entries=entries)


def _read_filter(
    request: DescribeClientQuotasRequest,
) -> tuple[dict[str, str | None], set[str]]:
    exact: dict[str, str | None] = {}
    specified: set[str] = set()
    for component in request.components:
        kind = component.entity_type
        if not kind:
            raise invalid("Invalid empty entity type.")
        if kind in exact or kind in specified:
            raise invalid(f"Entity type {kind} cannot appear more than once in the filter.")
        if kind not in ENTITY_TYPES:
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {kind}")
        if component.match_type == MATCH_EXACT:
            if component.match is None:
                raise invalid("Request specified MATCH_TYPE_EXACT, but set match string to null.")
            exact[kind] = component.match
        elif component.match_type == MATCH_DEFAULT:
            if component.match is not None:
                raise invalid(
                    "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
                )
            exact[kind] = None
        elif component.match_type == MATCH_SPECIFIED:
            if component.match is not None:
                raise invalid(
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
                )
            specified.add(kind)
        else:
            raise invalid(f"Unknown match type {component.match_type}")
    kinds = exact.keys() | specified
    if IP in kinds and kinds & {USER, CLIENT_ID}:
        raise invalid(
            "Invalid entity filter component combination. IP filter component should not be "
            "used with user or clientId filter component."
        )
    return exact, specified


def _matches(
    entity: Mapping[str, str | None],
    exact: Mapping[str, str | None],
    specified: set[str],
    strict: bool,
) -> bool:
    if strict and len(entity) != len(exact) + len(specified):
        return False
    if any(kind not in entity or entity[kind] != name for kind, name in exact.items()):
        return False
    return all(kind in entity for kind in specified)


def _quota_values(entity: Entity, configs: Mapping[str, str]) -> dict[str, float]:
    """The quotas among an entity's configs (a user's also holds its SCRAM credentials)."""
    keys = IP_QUOTA_CONFIGS if entity[0][0] == IP else CLIENT_QUOTA_CONFIGS
    values = {}
    for key, text in configs.items():
        if key in keys:
            try:
                values[key] = float(text)
            except ValueError:
                continue  # a malformed value written by hand is not a quota
    return values


# -- AlterClientQuotas ----------------------------------------------------------------


@api(alter_client_quotas, 0, 1)
async def handle_alter_client_quotas(
    ctx: RequestContext, request: AlterClientQuotasRequest
) -> AlterClientQuotasResponse:
    allowed = ctx.authorize_cluster(AclOperation.ALTER_CONFIGS)
    results: dict[tuple[tuple[str, str | None], ...], tuple[ErrorCode, str | None]] = {}
    for entry in request.entries:
        key = tuple((e.entity_type, e.entity_name) for e in entry.entity)
        if not allowed:
            denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            results[key] = (denied, default_message(denied))
            continue
        if key in results:
            results[key] = (ErrorCode.INVALID_REQUEST, f"Ignoring duplicate entity {_show(key)}")
            continue
        try:
            entity = _validated_entity(key)
            changes = _changes(entity, entry.ops, key)
            if not request.validate_only:
                await ctx.services.entity_configs.alter(entity, changes)
        except KafkaError as error:
            results[key] = (error.code, error.message)
        else:
            results[key] = (ErrorCode.NONE, None)
    return AlterClientQuotasResponse(
        entries=[
            EntryResult(
                error_code=code,
                error_message=message,
                entity=[EntityData(kind, name) for kind, name in key],
            )
            for key, (code, message) in results.items()
        ]
    )


def _validated_entity(entries: Iterable[tuple[str, str | None]]) -> Entity:
    """The entity in Kafka's order, or INVALID_REQUEST with Kafka's message."""
    named: dict[str, str | None] = {}
    for kind, name in entries:
        if kind in named:
            raise invalid(f"Invalid client quota entity, duplicate entity entry {kind}")
        if kind not in ENTITY_TYPES:
            raise invalid(f"Unhandled client quota entity type: {kind}")
        named[kind] = name
        if name is not None and not name:
            raise invalid(f"Empty {kind} not supported")
    if not named:
        raise invalid("Invalid empty client quota entity")
    if IP in named:
        if len(named) > 1:
            raise invalid(
                "Invalid quota entity combination, IP entity shouldnot be combined with User "
                "or ClientId"
            )
        if not _valid_address(named[IP]):
            raise invalid(f"{named[IP]} is not a valid IP or resolvable host.")
    return tuple((kind, named[kind]) for kind in ENTITY_TYPES if kind in named)


def _valid_address(address: str | None) -> bool:
    if address is None:
        return True
    try:
        ipaddress.ip_address(address)
    except ValueError:
        try:
            socket.getaddrinfo(address, None)
        except OSError:
            return False
    return True


def _changes(entity: Entity, ops: list, key: tuple) -> dict[str, str | None]:
    """The config text to store per key (None removes), checked as Kafka checks values."""
    keys = IP_QUOTA_CONFIGS if entity[0][0] == IP else CLIENT_QUOTA_CONFIGS
    changes: dict[str, str | None] = {}
    for op in ops:
        if op.key in changes:
            raise invalid(
                f"Duplicate quota key {op.key} not updating quota for this entity {_show(key)}"
            )
        if op.remove:
            changes[op.key] = None
            continue
        config = keys.get(op.key)
        if config is None:
            raise invalid(f"Invalid configuration key {op.key}")
        if op.value <= 0.0:
            raise invalid(f"Quota {op.key} must be greater than 0")
        if config.type is ConfigType.DOUBLE:
            changes[op.key] = java_str(float(op.value))
            continue
        is_int = config.type is ConfigType.INT
        limit, article = (2**31 - 1, "an INT") if is_int else (2**63 - 1, "a LONG")
        if op.value > limit:
            raise invalid(f"Proposed value for {op.key} is too large for {article}.")
        if abs(op.value % 1.0) > 1e-6:
            raise invalid(f"{op.key} cannot be a fractional value.")
        changes[op.key] = str(int(op.value + 1e-6))
    return changes


def _show(key: tuple) -> str:
    """An entity as Kafka's ``ClientQuotaEntity.toString`` prints it."""
    inner = ", ".join(f"{kind}={name}" for kind, name in key)
    return f"ClientQuotaEntity(entries={{{inner}}})"
