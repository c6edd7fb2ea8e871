"""Stock clients set up against a secured broker (``secure_broker``): confluent-kafka's
settings per listener and user, SCRAM users, ACL grants and topics made by ``admin``."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.helpers.brokers import ManagedBroker, Overrides
from tests.helpers.secure_broker import USERS, Credentials, secure_broker

SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def confluent_config(
    broker: Any, credentials: Credentials, listener: str, user: str, mechanism: str = "PLAIN"
) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap.servers": broker.bootstrap_for(listener),
        "security.protocol": listener,
    }
    if listener in ("SSL", "SASL_SSL"):
        config["ssl.ca.location"] = str(credentials.ca_pem)
    if listener == "SSL":
        files = credentials.client(user)
        config["ssl.certificate.location"] = str(files.chain_pem)
        config["ssl.key.location"] = str(files.key_pem)
    else:
        config |= {
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": USERS[user],
        }
    return config


def add_scram_users(broker: Any) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient(
        {
            "bootstrap.servers": broker.bootstrap_for("SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "admin",
            "sasl.password": USERS["admin"],
        }
    )
    for mechanism in SCRAM:  # Kafka refuses a user twice in one request, whatever mechanism
        info = ScramCredentialInfo(getattr(ScramMechanism, mechanism.replace("-", "_")), 4096)
        upserts = [
            UserScramCredentialUpsertion(user, info, password.encode())
            for user, password in USERS.items()
        ]
        for future in admin.alter_user_scram_credentials(upserts).values():
            future.result(30)


def admin_client(broker: Any) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient(
        {
            "bootstrap.servers": broker.bootstrap_for("SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "admin",
            "sasl.password": USERS["admin"],
        }
    )


def acl(
    resource_type: str,
    name: str,
    user: str,
    operation: str,
    permission: str = "ALLOW",
    pattern: str = "LITERAL",
) -> Any:
    """An ACL binding in confluent-kafka's terms, by the names of its enum members."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    kind = "BROKER" if resource_type == "CLUSTER" else resource_type  # its name in the client
    return AclBinding(
        getattr(ResourceType, kind),
        name,
        getattr(ResourcePatternType, pattern),
        f"User:{user}",
        "*",
        getattr(AclOperation, operation),
        getattr(AclPermissionType, permission),
    )


def add_acls(broker: Any, *bindings: Any) -> None:
    admin = admin_client(broker)  # referenced until the futures are done
    for future in admin.create_acls(list(bindings)).values():
        future.result(30)


def grant(broker: Any, user: str, topic: str, *operations: str, group: str | None = None) -> None:
    """ALLOW ``operations`` on ``topic`` to ``user``, and READ on ``group``."""
    bindings = [acl("TOPIC", topic, user, operation) for operation in operations]
    if group is not None:
        bindings.append(acl("GROUP", group, user, "READ"))
    add_acls(broker, *bindings)


def new_topic(broker: Any) -> str:
    from confluent_kafka.admin import NewTopic

    name = f"secure-{uuid.uuid4().hex[:8]}"
    admin = admin_client(broker)  # referenced until the futures are done
    for future in admin.create_topics([NewTopic(name, 1, 1)]).values():
        future.result(30)
    return name


def oauth_refused(broker: Any, token: str) -> Any:
    """Present ``token`` with OAUTHBEARER on the SASL_PLAINTEXT listener, raw (librdkafka
    will not send an expired token); the JSON error the broker challenges with, after which
    the client's acknowledgement must fail the attempt and close the connection."""
    import json

    from kpybroker.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
    from kpybroker.protocol.messages.sasl_handshake import SaslHandshakeRequest
    from kpybroker.security.sasl.oauthbearer import OAuthBearerSaslClient
    from tests.helpers.groups_wire import Wire

    with Wire(broker.bootstrap_for("SASL_PLAINTEXT"), client_id="oauth-test") as connection:
        assert connection.call(SaslHandshakeRequest(mechanism="OAUTHBEARER"), 1).error_code == 0
        first = OAuthBearerSaslClient(token).initial_response()
        challenge = connection.call(SaslAuthenticateRequest(auth_bytes=first), 1)
        assert challenge.error_code == 0, challenge
        refused = connection.call(SaslAuthenticateRequest(auth_bytes=b"\x01"), 1)
        assert refused.error_code == 58, refused  # SASL_AUTHENTICATION_FAILED
        connection.expect_closed()
        return json.loads(challenge.auth_bytes)


@contextmanager
def running_secure_broker(
    directory: Path,
    credentials: Credentials,
    overrides: Overrides | None = None,
    *,
    scram_users: bool = True,
) -> Iterator[ManagedBroker]:
    """A started secured broker (with the SCRAM users of ``USERS`` unless ``scram_users`` is
    false), stopped on exit: what every secured test module starts its tests with."""
    broker = secure_broker(directory, credentials, overrides)
    broker.start()
    try:
        if scram_users:
            add_scram_users(broker)
        yield broker
    finally:
        broker.stop()
