"""Workloads 8 and 9's clients: the listeners they use, their settings there, and their user.

Both brokers run with the settings of ``docs/secure-server.properties`` (through
``tests/helpers/secure_broker.py``): ACLs on, nothing allowed without one. The perf tools run
as ``alice``, an ordinary user, so that every request is authorized as in a secured deployment
(a super user would skip the ACLs): over SSL with her client certificate (``CN=alice`` maps to
``User:alice``), over SASL_SSL with SCRAM-SHA-512, her credential added with
AlterUserScramCredentials first. Prefixed ACLs allow her the bench's topics and groups. Topics
are created on the PLAINTEXT port, whose ``User:ANONYMOUS`` is a super user, as for the
plaintext workloads.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from confluent_kafka.admin import AclBindingFilter, AclOperation, AclPermissionType, ResourceType
from confluent_kafka.admin import ResourcePatternType as Pattern

from benchlib.brokers import Measured, listener_bootstrap
from benchlib.javatools import GROUP_PREFIX
from tests.helpers.client_properties import mutual_tls_settings, sasl_settings
from tests.helpers.secure_broker import Credentials
from tests.helpers.secure_clients import acl, add_acls, add_scram_users, admin_client

#: Who the perf tools are.
USER = "alice"
#: What her ACLs allow: topics and (``javatools.GROUP_PREFIX``) consumer groups by prefix.
TOPIC_PREFIX = "secured-"
MECHANISM = "SCRAM-SHA-512"
#: Her ACLs: WRITE and READ on the topics (each implies DESCRIBE, and WRITE the idempotent
#: producer's IDEMPOTENT_WRITE), READ on the groups.
GRANTS = (("TOPIC", TOPIC_PREFIX, "WRITE"), ("TOPIC", TOPIC_PREFIX, "READ"),
          ("GROUP", GROUP_PREFIX, "READ"))  # fmt: skip
#: Seconds the broker may take to apply the ACLs after CreateAcls has answered.
ACL_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Listener:
    """A listener the clients use, and the client settings it needs beyond the bootstrap
    address (the tools' ``--producer.config`` / ``--consumer.config`` file)."""

    name: str
    label: str
    settings: Mapping[str, str] = field(default_factory=dict)

    def bootstrap(self, broker: Measured) -> str:
        return listener_bootstrap(broker, self.name)


PLAINTEXT = Listener("PLAINTEXT", "PLAINTEXT")

#: The secured listeners' labels, as the workloads' cases name them.
SSL_LABEL = "SSL (client certificate)"
SASL_SSL_LABEL = f"SASL_SSL ({MECHANISM})"


def secured_listeners(credentials: Credentials) -> tuple[Listener, ...]:
    """SSL with ``alice``'s client certificate, and SASL_SSL with her SCRAM-SHA-512 password,
    both trusting the brokers' CA; the files are ``credentials``'s."""
    return (
        Listener("SSL", SSL_LABEL, mutual_tls_settings(credentials, USER)),
        Listener("SASL_SSL", SASL_SSL_LABEL, sasl_settings(credentials, MECHANISM, USER)),
    )


def authorize_user(broker: Measured) -> None:
    """Add the SCRAM users (AlterUserScramCredentials) and ``alice``'s ACLs, and wait until the
    broker authorizes with them: Kafka applies both from its metadata log a moment after
    answering, and a tool refused its first request would fail the step."""
    add_scram_users(broker)
    add_acls(broker, *(acl(kind, name, USER, op, pattern="PREFIXED") for kind, name, op in GRANTS))
    admin = admin_client(broker)
    mine = AclBindingFilter(
        ResourceType.ANY, None, Pattern.ANY, f"User:{USER}", None,
        AclOperation.ANY, AclPermissionType.ANY,
    )  # fmt: skip
    deadline = time.monotonic() + ACL_TIMEOUT_S
    while len(admin.describe_acls(mine).result(ACL_TIMEOUT_S)) < len(GRANTS):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{broker.label} does not show {USER}'s ACLs")
        time.sleep(0.1)
