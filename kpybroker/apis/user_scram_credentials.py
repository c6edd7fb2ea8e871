"""DescribeUserScramCredentials (key 50) and AlterUserScramCredentials (key 51): SCRAM users,
as ``kafka-configs.sh --entity-type users --alter --add-config 'SCRAM-SHA-256=[...]'`` and
the admin clients manage them.

Both answer as Kafka 4 does (``ScramImage.describe`` and
``ScramControlManager.alterCredentials``, with their messages): every user
once, RESOURCE_NOT_FOUND for a user without credentials, DUPLICATE_RESOURCE
for a user named twice, UNACCEPTABLE_CREDENTIAL for an empty name or an
iteration count out of 4096-16384, UNSUPPORTED_SASL_MECHANISM for an unknown
mechanism. The client sends the salt and the salted password, never the
password; the stored and server keys are computed from them, and the
credential is stored with the user's configs (``security.scram_users``).
Describing needs DESCRIBE on the cluster, altering ALTER (a user cannot change
its own credential without it, as in Kafka).
"""

from __future__ import annotations

from collections.abc import Iterable

from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.registry import api
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.messages import (
    alter_user_scram_credentials,
    describe_user_scram_credentials,
)
from kpybroker.protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
)
from kpybroker.protocol.messages.describe_user_scram_credentials import (
    CredentialInfo,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentialsResult,
)
from kpybroker.security.acls.model import AclOperation
from kpybroker.security.sasl.scram_credentials import (
    MAX_ITERATIONS,
    ScramMechanism,
    credential_to_string,
)
from kpybroker.security.scram_users import stored_credentials, user_entity

TWICE = "A user credential cannot be altered twice in the same request"


# -- DescribeUserScramCredentials -----------------------------------------------------


@api(describe_user_scram_credentials, 0, 0)
async def handle_describe_user_scram_credentials(
    ctx: RequestContext, request: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        # Kafka answers one result per requested user, with an empty name; asked for every
        # user, its error answer fails (a null list), and the client sees only the top level.
        denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return DescribeUserScramCredentialsResponse(
            error_code=denied,
            error_message=None,
            results=[
                DescribeUserScramCredentialsResult(user="", error_code=denied, error_message=None)
                for _ in request.users or ()
            ],
        )
    entities = ctx.services.entity_configs
    if not request.users:
        names = [
            name
            for entity, configs in entities
            if len(entity) == 1
            and entity[0][0] == "user"
            and (name := entity[0][1]) is not None
            and stored_credentials(configs)
        ]
        twice: set[str] = set()
    else:
        names, twice = _distinct(user.name for user in request.users)
    results = []
    for name in names:
        result = DescribeUserScramCredentialsResult(user=name)
        credentials = stored_credentials(entities.configs(user_entity(name)))
        if name in twice:
            result.error_code = ErrorCode.DUPLICATE_RESOURCE
            result.error_message = (
                "Cannot describe SCRAM credentials for the same user twice in a single "
                f"request: {name}"
            )
        elif not credentials:
            result.error_code = ErrorCode.RESOURCE_NOT_FOUND
            result.error_message = (
                f"Attempt to describe a user credential that does not exist: {name}"
            )
        else:
            result.credential_infos = [
                CredentialInfo(mechanism.type, credential.iterations)
                for mechanism, credential in credentials.items()
            ]
        results.append(result)
    return DescribeUserScramCredentialsResponse(error_code=ErrorCode.NONE, results=results)


def _distinct(names: Iterable[str]) -> tuple[list[str], set[str]]:
    """The names in first-seen order, and those named more than once."""
    seen: dict[str, None] = {}
    twice = set()
    for name in names:
        if name in seen:
            twice.add(name)
        seen[name] = None
    return list(seen), twice


# -- AlterUserScramCredentials --------------------------------------------------------


@api(alter_user_scram_credentials, 0, 0)
async def handle_alter_user_scram_credentials(
    ctx: RequestContext, request: AlterUserScramCredentialsRequest
) -> AlterUserScramCredentialsResponse:
    users = sorted({d.name for d in request.deletions} | {u.name for u in request.upsertions})
    if not ctx.authorize_cluster(AclOperation.ALTER):
        message = ctx.cluster_denial_message(AclOperation.ALTER)
        return AlterUserScramCredentialsResponse(
            results=[
                AlterUserScramCredentialsResult(
                    user, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, message
                )
                for user in users
            ]
        )
    entities = ctx.services.entity_configs
    errors: dict[str, KafkaError] = {}
    deletions: dict[str, ScramMechanism] = {}
    upsertions: dict[str, tuple[ScramMechanism, str]] = {}
    for deletion in request.deletions:
        if deletion.name in errors:
            continue
        if deletions.pop(deletion.name, None) is not None:
            errors[deletion.name] = KafkaError(ErrorCode.DUPLICATE_RESOURCE, TWICE)
            continue
        try:
            mechanism = _mechanism(deletion.name, deletion.mechanism)
            stored = stored_credentials(entities.configs(user_entity(deletion.name)))
            if mechanism not in stored:
                raise KafkaError(
                    ErrorCode.RESOURCE_NOT_FOUND,
                    "Attempt to delete a user credential that does not exist",
                )
        except KafkaError as error:
            errors[deletion.name] = error
            continue
        deletions[deletion.name] = mechanism
    for upsertion in request.upsertions:
        name = upsertion.name
        if name in errors:
            continue
        if deletions.pop(name, None) is not None or upsertions.pop(name, None) is not None:
            errors[name] = KafkaError(ErrorCode.DUPLICATE_RESOURCE, TWICE)
            continue
        try:
            mechanism = _mechanism(name, upsertion.mechanism)
            if upsertion.iterations < mechanism.min_iterations:
                raise KafkaError(ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
            if upsertion.iterations > MAX_ITERATIONS:
                raise KafkaError(ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
        except KafkaError as error:
            errors[name] = error
            continue
        credential = mechanism.credential_from_salted_password(
            upsertion.salt, upsertion.salted_password, upsertion.iterations
        )
        upsertions[name] = (mechanism, credential_to_string(credential))
    results = []
    for name, mechanism in deletions.items():
        await entities.alter(user_entity(name), {mechanism.mechanism_name: None})
        results.append(AlterUserScramCredentialsResult(name, ErrorCode.NONE, None))
    for name, (mechanism, text) in upsertions.items():
        await entities.alter(user_entity(name), {mechanism.mechanism_name: text})
        results.append(AlterUserScramCredentialsResult(name, ErrorCode.NONE, None))
    results += [
        AlterUserScramCredentialsResult(name, error.code, error.message)
        for name, error in errors.items()
    ]
    return AlterUserScramCredentialsResponse(results=results)


def _mechanism(user: str, mechanism_type: int) -> ScramMechanism:
    if not user:
        raise KafkaError(ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
    mechanism = ScramMechanism.from_type(mechanism_type)
    if mechanism is None:
        raise KafkaError(ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
    return mechanism
