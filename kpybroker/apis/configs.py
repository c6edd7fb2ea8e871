"""DescribeConfigs (key 32), AlterConfigs (key 33) and IncrementalAlterConfigs (key 44).

DescribeConfigs versions: 0 is gone in Kafka 4; 1 adds synonyms (when asked) and
each value's source in place of v0's is_default; 2 is the same wire; 3 adds each
config's type and, when asked, its documentation; 4 is flexible.

AlterConfigs versions: replaces a resource's whole dynamic config set (a config left
out is deleted); 1 is the same wire; 2 is flexible. IncrementalAlterConfigs versions:
SET, DELETE, APPEND or SUBTRACT single configs; 1 is flexible. Both have validate_only.

Resources are topics, this broker (by id), the cluster-wide broker defaults (the
name "") and groups (KIP-848's group configs; a group need not exist, and the name ""
is INVALID_REQUEST). Changes are written to the metadata store, from where the broker
applies them at once; an unknown config or a bad value is INVALID_CONFIG naming the key,
and nothing of that resource is changed. This broker's loggers (BROKER_LOGGER, by the
broker's id) are described, and changed by IncrementalAlterConfigs only, in this process
(``kpybroker/config/broker_loggers.py``); AlterConfigs refuses them as Kafka does.

Permissions, as Kafka 4 checks them: DESCRIBE_CONFIGS (to describe) or ALTER_CONFIGS (to
alter) on the topic or group named, or on the cluster for brokers, broker loggers and
client metrics. DescribeConfigs answers the refused resources after the others, and a
resource of an unknown type fails the whole request; the alter APIs answer in request
order, and check duplicates and null values before permissions.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TypeVar

from kpybroker.apis.support.config_changes import (
    ConfigOp,
    OpType,
    Resources,
    check_resources,
    new_configs,
    unknown_operation,
)
from kpybroker.apis.support.config_resources import (
    ConfigResource,
    ResourceType,
    check_logger_node,
    resolve_for_alter,
    resolve_for_describe,
)
from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.registry import api
from kpybroker.config import broker_loggers
from kpybroker.config.core import ConfigSource
from kpybroker.config.describe import (
    UNKNOWN_TYPE,
    ConfigEntry,
    broker_config_entries,
    default_broker_config_entries,
    group_config_entries,
    topic_config_entries,
)
from kpybroker.protocol.errors import ErrorCode, KafkaError, default_message
from kpybroker.protocol.messages import alter_configs, describe_configs, incremental_alter_configs
from kpybroker.protocol.messages.alter_configs import (
    AlterConfigsRequest,
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
)
from kpybroker.protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)
from kpybroker.protocol.messages.incremental_alter_configs import (
    AlterConfigsResourceResponse as IncrementalResourceResponse,
)
from kpybroker.protocol.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kpybroker.security.acls.model import CLUSTER_NAME, AclOperation
from kpybroker.security.acls.model import ResourceType as AclResourceType

T = TypeVar("T")

# ---------------------------------------------------------------------------- permissions

#: Per config resource type, where its permission is checked and the code of a refusal.
GUARDS: dict[int, tuple[AclResourceType, ErrorCode]] = {
    ResourceType.BROKER: (AclResourceType.CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    ResourceType.BROKER_LOGGER: (AclResourceType.CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    ResourceType.CLIENT_METRICS: (AclResourceType.CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    ResourceType.TOPIC: (AclResourceType.TOPIC, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ResourceType.GROUP: (AclResourceType.GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED),
}


def refusal(
    ctx: RequestContext, operation: AclOperation, type_id: int, name: str
) -> ErrorCode | None:
    """The code refusing ``operation`` on a config resource of a type in ``GUARDS``, or
    None when the principal may."""
    acl_type, code = GUARDS[type_id]
    acl_name = CLUSTER_NAME if acl_type is AclResourceType.CLUSTER else name
    return None if ctx.authorize(operation, acl_type, acl_name) else code


# ---------------------------------------------------------------------------- describe


def config_entries(ctx: RequestContext, resource: ConfigResource) -> list[ConfigEntry]:
    services = ctx.services
    if resource.type is ResourceType.TOPIC:
        return topic_config_entries(
            services.config(), services.cluster.topic_overrides(resource.name)
        )
    if resource.type is ResourceType.GROUP:
        return group_config_entries(services.config(), resource.stored(services))
    if resource.is_cluster_default:
        return default_broker_config_entries(services.config(), resource.stored(services))
    return broker_config_entries(services.config())


def entry_result(
    entry: ConfigEntry, synonyms: bool, documentation: bool
) -> DescribeConfigsResourceResult:
    return DescribeConfigsResourceResult(
        name=entry.name,
        value=entry.value,
        read_only=entry.read_only,
        config_source=entry.source,
        is_sensitive=entry.sensitive,
        synonyms=[DescribeConfigsSynonym(s.name, s.value, s.source) for s in entry.synonyms]
        if synonyms
        else [],
        config_type=entry.config_type,
        documentation=entry.documentation if documentation else None,
    )


@api(describe_configs, 1, 4)
async def handle_describe_configs(
    ctx: RequestContext, request: DescribeConfigsRequest
) -> DescribeConfigsResponse:
    allowed: list[DescribeConfigsResource] = []
    refused: list[DescribeConfigsResult] = []
    for wanted in request.resources:
        if wanted.resource_type not in GUARDS:
            return invalid_describe_request(request)
        code = refusal(
            ctx, AclOperation.DESCRIBE_CONFIGS, wanted.resource_type, wanted.resource_name
        )
        if code is None:
            allowed.append(wanted)
        else:
            refused.append(
                DescribeConfigsResult(
                    error_code=code,
                    error_message=default_message(code),
                    resource_type=wanted.resource_type,
                    resource_name=wanted.resource_name,
                    configs=[],
                )
            )
    results = [describe_resource(ctx, request, wanted) for wanted in allowed]
    return DescribeConfigsResponse(results=results + refused)


def describe_resource(
    ctx: RequestContext, request: DescribeConfigsRequest, wanted: DescribeConfigsResource
) -> DescribeConfigsResult:
    # Kafka leaves the message at its default, "", unless an error says more.
    result = DescribeConfigsResult(
        error_message="",
        resource_type=wanted.resource_type,
        resource_name=wanted.resource_name,
    )
    try:
        resource = resolve_for_describe(ctx.services, wanted.resource_type, wanted.resource_name)
    except KafkaError as exc:
        result.error_code, result.error_message = exc.code, exc.message or ""
        return result
    keys = set(wanted.configuration_keys or ())
    if resource.type is ResourceType.BROKER_LOGGER:
        levels = broker_loggers.loggers()
        result.configs = [logger_result(name, levels[name]) for name in sorted(levels)]
    else:
        result.configs = [
            entry_result(entry, request.include_synonyms, request.include_documentation)
            for entry in config_entries(ctx, resource)
        ]
    if keys:
        result.configs = [entry for entry in result.configs if entry.name in keys]
    return result


def logger_result(name: str, level: str) -> DescribeConfigsResourceResult:
    """A logger as Kafka's ConfigHelper describes one: no synonyms, no type and no
    documentation (its default, ""), whatever the request asks for."""
    return DescribeConfigsResourceResult(
        name=name,
        value=level,
        read_only=False,
        config_source=ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG,
        is_sensitive=False,
        synonyms=[],
        config_type=UNKNOWN_TYPE,
        documentation="",
    )


def invalid_describe_request(request: DescribeConfigsRequest) -> DescribeConfigsResponse:
    """Kafka's answer to a resource type it has no permission rule for: its authorization
    step throws, and every resource gets INVALID_REQUEST with the default message."""
    code = ErrorCode.INVALID_REQUEST
    return DescribeConfigsResponse(
        results=[
            DescribeConfigsResult(
                error_code=code,
                error_message=default_message(code),
                resource_type=wanted.resource_type,
                resource_name=wanted.resource_name,
            )
            for wanted in request.resources
        ]
    )


# ---------------------------------------------------------------------------- alter

NewSet = Callable[[ConfigResource, Mapping[str, str], Sequence[ConfigOp]], dict[str, str]]
#: Checks and applies (unless validate-only) one resource's changes, raising its error.
Change = Callable[[RequestContext, int, str, Sequence[ConfigOp], bool], Awaitable[None]]


#: The resource types whose permission AlterConfigs checks: Kafka takes a broker logger
#: for an unknown type there, and only IncrementalAlterConfigs changes loggers.
ALTER_GUARDED = frozenset(
    {ResourceType.TOPIC, ResourceType.BROKER, ResourceType.CLIENT_METRICS, ResourceType.GROUP}
)
INCREMENTAL_ALTER_GUARDED = ALTER_GUARDED | {ResourceType.BROKER_LOGGER}
#: Refused by the broker itself, with no message; the controller refuses the other types
#: with the code's default message.
REFUSED_BY_BROKER = frozenset({ResourceType.BROKER, ResourceType.BROKER_LOGGER})


def alter_refusal(ctx: RequestContext, type_id: int, name: str) -> KafkaError | None:
    code = refusal(ctx, AclOperation.ALTER_CONFIGS, type_id, name)
    if code is None:
        return None
    return KafkaError(code, None if type_id in REFUSED_BY_BROKER else default_message(code))


async def alter_all(
    ctx: RequestContext,
    resources: Resources,
    change: Change,
    validate_only: bool,
    response_class: type[T],
    guarded: frozenset[int],
) -> list[T]:
    """Apply each resource's change on its own: one failing leaves the others to succeed.

    In Kafka's order: its preprocessing (``check_resources``), then the permission (for the
    ``guarded`` resource types), then ``change``. ``response_class`` is the API's
    per-resource response (both APIs' have the same fields).
    """
    responses = []
    for (type_id, name, ops), error in zip(resources, check_resources(resources), strict=True):
        if error is None and type_id in guarded:
            error = alter_refusal(ctx, type_id, name)
        if error is None:
            try:
                await change(ctx, type_id, name, ops, validate_only)
            except KafkaError as exc:
                error = exc
        responses.append(
            response_class(
                error_code=ErrorCode.NONE if error is None else error.code,
                error_message=None if error is None else error.message,
                resource_type=type_id,
                resource_name=name,
            )
        )
    return responses


def changing_configs(new_set: NewSet) -> Change:
    """A stored resource's change: its new dynamic set (``new_set``), validated and written."""

    async def change(
        ctx: RequestContext, type_id: int, name: str, ops: Sequence[ConfigOp], validate_only: bool
    ) -> None:
        if error := unknown_operation(ops):
            raise error
        resource = resolve_for_alter(ctx.services, type_id, name)
        configs = new_set(resource, resource.stored(ctx.services), ops)
        await resource.replace(ctx.services, configs, validate_only=validate_only)

    return change


def replaced_set(
    _resource: ConfigResource, _current: Mapping[str, str], ops: Sequence[ConfigOp]
) -> dict[str, str]:
    """AlterConfigs: the request's values are the whole new set."""
    return {op.name: op.value for op in ops if op.value is not None}


def incremented_set(
    resource: ConfigResource, current: Mapping[str, str], ops: Sequence[ConfigOp]
) -> dict[str, str]:
    return new_configs(current, ops, resource.key)


async def change_loggers(
    ctx: RequestContext, name: str, ops: Sequence[ConfigOp], validate_only: bool
) -> None:
    """This broker's log levels, as Kafka's ``RuntimeLoggerManager``: the broker's id, then
    every operation checked, then (unless validate-only) all of them applied in order."""
    check_logger_node(ctx.services, name)
    for op in ops:
        if op.op == OpType.SET:
            assert op.value is not None
            broker_loggers.check_set(op.name, op.value)
        elif op.op == OpType.DELETE:
            broker_loggers.check_unset(op.name)
        elif op.op in (OpType.APPEND, OpType.SUBTRACT):
            raise _not_for_loggers(f"{OpType(op.op).name} operation")
        else:
            raise _not_for_loggers(f"Unknown operation type {op.op}")
    if validate_only:
        return
    for op in ops:
        if op.op == OpType.SET:
            assert op.value is not None
            broker_loggers.set_level(op.name, op.value)
        else:
            broker_loggers.unset_level(op.name)


def _not_for_loggers(what: str) -> KafkaError:
    return KafkaError(
        ErrorCode.INVALID_REQUEST, f"{what} is not allowed for the BROKER_LOGGER resource"
    )


async def change_incrementally(
    ctx: RequestContext, type_id: int, name: str, ops: Sequence[ConfigOp], validate_only: bool
) -> None:
    """IncrementalAlterConfigs' change of one resource: a logger's, or a stored one's."""
    if type_id == ResourceType.BROKER_LOGGER:
        await change_loggers(ctx, name, ops, validate_only)
    else:
        await changing_configs(incremented_set)(ctx, type_id, name, ops, validate_only)


@api(alter_configs, 0, 2)
async def handle_alter_configs(
    ctx: RequestContext, request: AlterConfigsRequest
) -> AlterConfigsResponse:
    resources = [
        (
            r.resource_type,
            r.resource_name,
            [ConfigOp(c.name, OpType.SET, c.value) for c in r.configs],
        )
        for r in request.resources
    ]
    responses = await alter_all(
        ctx,
        resources,
        changing_configs(replaced_set),
        request.validate_only,
        AlterConfigsResourceResponse,
        ALTER_GUARDED,
    )
    return AlterConfigsResponse(responses=responses)


@api(incremental_alter_configs, 0, 1)
async def handle_incremental_alter_configs(
    ctx: RequestContext, request: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
    resources = [
        (
            r.resource_type,
            r.resource_name,
            [ConfigOp(c.name, c.config_operation, c.value) for c in r.configs],
        )
        for r in request.resources
    ]
    responses = await alter_all(
        ctx,
        resources,
        change_incrementally,
        request.validate_only,
        IncrementalResourceResponse,
        INCREMENTAL_ALTER_GUARDED,
    )
    return IncrementalAlterConfigsResponse(responses=responses)
