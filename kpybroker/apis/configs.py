"""DescribeConfigs (key 32), AlterConfigs (key 33) and IncrementalAlterConfigs (key 44).

DescribeConfigs versions: 0 is gone in Kafka 4; 1 adds synonyms (when asked) and
each value's source in place of v0's is_default; 2 is the same wire; 3 adds each
config's type and, when asked, its documentation; 4 is flexible.

AlterConfigs versions: replaces a resource's whole dynamic config set (a config left
out is deleted); 1 is the same wire; 2 is flexible. IncrementalAlterConfigs versions:
SET, DELETE, APPEND or SUBTRACT single configs; 1 is flexible. Both have validate_only.

Resources are topics, this broker (by id) and the cluster-wide broker defaults (the
name ""). Changes are written to the metadata store, from where the broker applies
them at once; an unknown config or a bad value is INVALID_CONFIG naming the key, and
nothing of that resource is changed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from kpybroker.apis.support.config_changes import (
    ConfigOp,
    OpType,
    Resources,
    check_resources,
    new_configs,
)
from kpybroker.apis.support.config_resources import (
    ConfigResource,
    ResourceType,
    resolve_for_alter,
    resolve_for_describe,
)
from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.registry import api
from kpybroker.config.describe import (
    ConfigEntry,
    broker_config_entries,
    default_broker_config_entries,
    topic_config_entries,
)
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.messages import alter_configs, describe_configs, incremental_alter_configs
from kpybroker.protocol.messages.alter_configs import (
    AlterConfigsRequest,
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
)
from kpybroker.protocol.messages.describe_configs import (
    DescribeConfigsRequest,
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

T = TypeVar("T")

# ---------------------------------------------------------------------------- describe


def config_entries(ctx: RequestContext, resource: ConfigResource) -> list[ConfigEntry]:
    services = ctx.services
    if resource.type is ResourceType.TOPIC:
        return topic_config_entries(
            services.config(), services.cluster.topic_overrides(resource.name)
        )
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
    results = []
    for wanted in request.resources:
        # Kafka leaves the message at its default, "", unless an error says more.
        result = DescribeConfigsResult(
            error_message="",
            resource_type=wanted.resource_type,
            resource_name=wanted.resource_name,
        )
        results.append(result)
        try:
            resource = resolve_for_describe(
                ctx.services, wanted.resource_type, wanted.resource_name
            )
        except KafkaError as exc:
            result.error_code, result.error_message = exc.code, exc.message or ""
            continue
        keys = set(wanted.configuration_keys or ())
        result.configs = [
            entry_result(entry, request.include_synonyms, request.include_documentation)
            for entry in config_entries(ctx, resource)
            if not keys or entry.name in keys
        ]
    return DescribeConfigsResponse(results=results)


# ---------------------------------------------------------------------------- alter

NewSet = Callable[[ConfigResource, Mapping[str, str], Sequence[ConfigOp]], dict[str, str]]


async def alter_all(
    ctx: RequestContext,
    resources: Resources,
    new_set: NewSet,
    validate_only: bool,
    response_class: type[T],
) -> list[T]:
    """Apply each resource's change on its own: one failing leaves the others to succeed.

    ``response_class`` is the API's per-resource response (both APIs' have the same fields).
    """
    responses = []
    for (type_id, name, ops), error in zip(resources, check_resources(resources), strict=True):
        try:
            if error is not None:
                raise error
            resource = resolve_for_alter(ctx.services, type_id, name)
            configs = new_set(resource, resource.stored(ctx.services), ops)
            await resource.replace(ctx.services, configs, validate_only=validate_only)
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


def replaced_set(
    _resource: ConfigResource, _current: Mapping[str, str], ops: Sequence[ConfigOp]
) -> dict[str, str]:
    """AlterConfigs: the request's values are the whole new set."""
    return {op.name: op.value for op in ops if op.value is not None}


def incremented_set(
    resource: ConfigResource, current: Mapping[str, str], ops: Sequence[ConfigOp]
) -> dict[str, str]:
    return new_configs(current, ops, resource.key)


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
        ctx, resources, replaced_set, request.validate_only, AlterConfigsResourceResponse
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
        ctx, resources, incremented_set, request.validate_only, IncrementalResourceResponse
    )
    return IncrementalAlterConfigsResponse(responses=responses)
