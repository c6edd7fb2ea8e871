"""DescribeAcls (key 29), CreateAcls (key 30), DeleteAcls (key 31): ``kafka-acls.sh``.

Kafka 4 serves versions 1-3 (v0 knew no pattern types; v2 is flexible, v3 adds
the USER resource type). Describing needs DESCRIBE on the cluster, creating and
deleting ALTER; without them the answer is CLUSTER_AUTHORIZATION_FAILED with
Kafka's "Request ... needs ... permission." (per creation or filter, or at the
top). Without an authorizer the answer is SECURITY_DISABLED, after the
permission check, as in Kafka. A raw code 0 (UNKNOWN) in a request is a
request Kafka cannot parse: the connection is closed. Otherwise a creation or a
filter with an unknown or a filter-only value gets Kafka's INVALID_REQUEST
message (``security.acls.validation``); one that names ANY where only a filter
may cannot even be built, and Kafka fails the whole request with
UNKNOWN_SERVER_ERROR.

The ACLs are written to the metadata store, where every broker follows them
(``security.acls.acl_store``).
"""

from __future__ import annotations

from collections.abc import Iterable

from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.registry import CloseConnection, api
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import create_acls, delete_acls, describe_acls
from kpybroker.protocol.messages.create_acls import (
    AclCreationResult,
    CreateAclsRequest,
    CreateAclsResponse,
)
from kpybroker.protocol.messages.delete_acls import (
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsRequest,
    DeleteAclsResponse,
)
from kpybroker.protocol.messages.describe_acls import (
    AclDescription,
    DescribeAclsRequest,
    DescribeAclsResource,
    DescribeAclsResponse,
)
from kpybroker.security.acls.model import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)

NO_AUTHORIZER = "No Authorizer is configured."
UNKNOWN = 0


def _refuse_unknown_codes(*codes: int) -> None:
    """Kafka's request classes refuse a raw UNKNOWN (0) while parsing: the connection closes."""
    if UNKNOWN in codes:
        raise CloseConnection("an ACL request with an UNKNOWN element")


def _filter(
    resource_type: int,
    name: str | None,
    pattern_type: int,
    principal: str | None,
    host: str | None,
    operation: int,
    permission_type: int,
) -> AclBindingFilter:
    return AclBindingFilter(
        ResourcePatternFilter(
            ResourceType.from_code(resource_type), name, PatternType.from_code(pattern_type)
        ),
        AccessControlEntryFilter(
            principal,
            host,
            AclOperation.from_code(operation),
            AclPermissionType.from_code(permission_type),
        ),
    )


# -- DescribeAcls ---------------------------------------------------------------------


@api(describe_acls, 1, 3)
async def handle_describe_acls(
    ctx: RequestContext, request: DescribeAclsRequest
) -> DescribeAclsResponse:
    _refuse_unknown_codes(
        request.resource_type_filter,
        request.pattern_type_filter,
        request.operation,
        request.permission_type,
    )
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        return DescribeAclsResponse(
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            error_message=ctx.cluster_denial_message(AclOperation.DESCRIBE),
        )
    authorizer = ctx.services.authorizer
    if authorizer is None:
        return DescribeAclsResponse(
            error_code=ErrorCode.SECURITY_DISABLED,
            error_message="No Authorizer is configured on the broker",
        )
    wanted = _filter(
        request.resource_type_filter,
        request.resource_name_filter,
        request.pattern_type_filter,
        request.principal_filter,
        request.host_filter,
        request.operation,
        request.permission_type,
    )
    return DescribeAclsResponse(
        error_code=ErrorCode.NONE, resources=_by_resource(authorizer.acls(wanted))
    )


def _by_resource(bindings: Iterable[AclBinding]) -> list[DescribeAclsResource]:
    """Kafka's ``DescribeAclsResponse.aclsResources``: one entry per resource pattern."""
    resources: dict[ResourcePattern, DescribeAclsResource] = {}
    for binding in bindings:
        pattern, entry = binding.pattern, binding.entry
        resource = resources.get(pattern)
        if resource is None:
            resource = resources[pattern] = DescribeAclsResource(
                resource_type=pattern.resource_type,
                resource_name=pattern.name,
                pattern_type=pattern.pattern_type,
            )
        resource.acls.append(
            AclDescription(entry.principal, entry.host, entry.operation, entry.permission_type)
        )
    return list(resources.values())


# -- CreateAcls -----------------------------------------------------------------------


@api(create_acls, 1, 3)
async def handle_create_acls(ctx: RequestContext, request: CreateAclsRequest) -> CreateAclsResponse:
    for c in request.creations:
        _refuse_unknown_codes(
            c.resource_type, c.resource_pattern_type, c.operation, c.permission_type
        )
    if not ctx.authorize_cluster(AclOperation.ALTER):
        denied = ctx.cluster_denial_message(AclOperation.ALTER)
        return _creation_results(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, denied)
    if ctx.services.acls is None:
        return _creation_results(request, ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    try:
        bindings = [
            AclBinding(
                ResourcePattern(
                    ResourceType.from_code(c.resource_type),
                    c.resource_name,
                    PatternType.from_code(c.resource_pattern_type),
                ),
                AccessControlEntry(
                    c.principal,
                    c.host,
                    AclOperation.from_code(c.operation),
                    AclPermissionType.from_code(c.permission_type),
                ),
            )
            for c in request.creations
        ]
    except ValueError:
        # A filter's value (ANY, MATCH) where a binding needs a concrete one.
        return _creation_results(request, ErrorCode.UNKNOWN_SERVER_ERROR, None)
    errors = await ctx.services.acls.create(bindings)
    return CreateAclsResponse(
        results=[
            AclCreationResult(ErrorCode.NONE, "")  # Kafka's success carries an empty message
            if error is None
            else AclCreationResult(error[0], error[1])
            for error in errors
        ]
    )


def _creation_results(
    request: CreateAclsRequest, code: ErrorCode, message: str | None
) -> CreateAclsResponse:
    return CreateAclsResponse(results=[AclCreationResult(code, message) for _ in request.creations])


# -- DeleteAcls -----------------------------------------------------------------------


@api(delete_acls, 1, 3)
async def handle_delete_acls(ctx: RequestContext, request: DeleteAclsRequest) -> DeleteAclsResponse:
    for f in request.filters:
        _refuse_unknown_codes(
            f.resource_type_filter, f.pattern_type_filter, f.operation, f.permission_type
        )
    if not ctx.authorize_cluster(AclOperation.ALTER):
        denied = ctx.cluster_denial_message(AclOperation.ALTER)
        return _filter_results(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, denied)
    if ctx.services.acls is None:
        return _filter_results(request, ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    filters = [
        _filter(
            f.resource_type_filter,
            f.resource_name_filter,
            f.pattern_type_filter,
            f.principal_filter,
            f.host_filter,
            f.operation,
            f.permission_type,
        )
        for f in request.filters
    ]
    outcomes = await ctx.services.acls.delete(filters)
    results = []
    for outcome in outcomes:
        if outcome.error is not None:
            results.append(DeleteAclsFilterResult(outcome.error[0], outcome.error[1]))
            continue
        matching = []
        for deleted in outcome.deleted:
            code, message = deleted.error or (ErrorCode.NONE, None)
            pattern, entry = deleted.binding.pattern, deleted.binding.entry
            matching.append(
                DeleteAclsMatchingAcl(
                    error_code=code,
                    error_message=message,
                    resource_type=pattern.resource_type,
                    resource_name=pattern.name,
                    pattern_type=pattern.pattern_type,
                    principal=entry.principal,
                    host=entry.host,
                    operation=entry.operation,
                    permission_type=entry.permission_type,
                )
            )
        results.append(DeleteAclsFilterResult(ErrorCode.NONE, None, matching))
    return DeleteAclsResponse(filter_results=results)


def _filter_results(
    request: DeleteAclsRequest, code: ErrorCode, message: str | None
) -> DeleteAclsResponse:
    return DeleteAclsResponse(
        filter_results=[DeleteAclsFilterResult(code, message) for _ in request.filters]
    )
