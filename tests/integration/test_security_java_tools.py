"""Apache Kafka's own Java tools against a secured broker, used the way an operator uses them.

``admin`` (the super user) runs kafka-configs.sh to add and delete SCRAM credentials and set
client quotas, and kafka-acls.sh to grant, list, deny and remove ACLs; then the users run clients:
the verifiable producer and consumer over SASL_SSL with SCRAM-SHA-512 and over SSL with a client
certificate, the console producer and consumer with OAUTHBEARER, and users refused for want of
an ACL, a password or a certificate. Every tool reads its security settings from a client
properties file (``--command-config``). One secured broker (``tests/helpers/secure_broker.py``)
serves the module; each test uses its own users, topics and groups.

With KPYBROKER_TEST_TARGET=kafka the same tests run against Apache Kafka, so the outputs asserted
here are Kafka's. Where Kafka prints in the order of a Java hash map keyed by enums (ACL listings,
a user's SCRAM mechanisms), which changes from one JVM to the next, the tests compare sets.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

import pytest

from tests.helpers.brokers import ManagedBroker
from tests.helpers.client_properties import (
    ClientProperties,
    ClientPropertiesWriter,
    trust_settings,
)
from tests.helpers.java import CONSOLE_CONSUMER, CONSOLE_PRODUCER, TOPIC_COMMAND
from tests.helpers.process import ToolResult, ToolRunner
from tests.helpers.secure_broker import USERS, Credentials
from tests.helpers.secure_clients import running_secure_broker

pytestmark = pytest.mark.timeout(300)

CONFIG_COMMAND = "org.apache.kafka.tools.ConfigCommand"
ACL_COMMAND = "org.apache.kafka.tools.AclCommand"
VERIFIABLE_PRODUCER = "org.apache.kafka.tools.VerifiableProducer"
VERIFIABLE_CONSUMER = "org.apache.kafka.tools.VerifiableConsumer"


@pytest.fixture(scope="module")
def credentials(tmp_path_factory: pytest.TempPathFactory) -> Credentials:
    return Credentials(tmp_path_factory.mktemp("credentials"))


@pytest.fixture(scope="module")
def secured(
    tmp_path_factory: pytest.TempPathFactory, credentials: Credentials
) -> Iterator[ManagedBroker]:
    # No wait before a new group's first rebalance (Kafka's default is 3 s), as the reference
    # Kafka of the tests has it.
    with running_secure_broker(
        tmp_path_factory.mktemp("secured"),
        credentials,
        {"group.initial.rebalance.delay.ms": "0"},
        scram_users=False,
    ) as broker:
        yield broker


class SecuredBroker(Protocol):
    """What the tests use of ``secure_broker``'s brokers (kpybroker's or Kafka's)."""

    @property
    def bootstrap(self) -> str: ...

    def bootstrap_for(self, listener: str) -> str: ...


@dataclass(frozen=True)
class Operator:
    """Kafka's tools pointed at the secured broker, each with a client properties file."""

    java_tool: ToolRunner
    broker: SecuredBroker
    properties: ClientPropertiesWriter

    @property
    def admin(self) -> ClientProperties:
        return self.properties.sasl("PLAIN", "admin")

    def run(
        self, main: str, client: ClientProperties, *args: str, input: str | None = None
    ) -> ToolResult:
        """``main --bootstrap-server <the client's listener> --command-config <its file> args``."""
        bootstrap = self.broker.bootstrap_for(client.listener)
        return self.java_tool(
            main, "--bootstrap-server", bootstrap, "--command-config", str(client.path), *args,
            input=input,
        )  # fmt: skip

    def configs(self, *args: str) -> ToolResult:
        """kafka-configs.sh as admin."""
        return self.run(CONFIG_COMMAND, self.admin, *args)

    def acls(self, *args: str) -> ToolResult:
        """kafka-acls.sh as admin."""
        return self.run(ACL_COMMAND, self.admin, *args)

    def create_topic(self, name: str, partitions: int = 1) -> str:
        """Make topic ``name`` on the harness's PLAINTEXT port (its ANONYMOUS is a super user)."""
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.broker.bootstrap})
        admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
        return name

    def produce(
        self, client: ClientProperties, topic: str, lines: list[str], *args: str
    ) -> ToolResult:
        """The console producer writes ``lines``; it exits 0 even when a send fails."""
        return self.run(
            CONSOLE_PRODUCER, client, "--topic", topic, *args,
            input="".join(f"{line}\n" for line in lines),
        ).check()  # fmt: skip

    def consume(
        self, client: ClientProperties, topic: str, group: str, count: int, *args: str
    ) -> ToolResult:
        """The console consumer reads ``count`` records from the start, in ``group``."""
        return self.run(
            CONSOLE_CONSUMER, client, "--topic", topic, "--group", group, "--from-beginning",
            "--max-messages", str(count), "--timeout-ms", "30000", *args,
        ).check()  # fmt: skip


@pytest.fixture(scope="module")
def operator(
    java_tool: ToolRunner,
    secured: ManagedBroker,
    credentials: Credentials,
    tmp_path_factory: pytest.TempPathFactory,
) -> Operator:
    writer = ClientPropertiesWriter(tmp_path_factory.mktemp("client-properties"), credentials)
    return Operator(java_tool, secured, writer)


def concurrently(*runs: Callable[[], ToolResult]) -> list[ToolResult]:
    """Run independent tools at once: each JVM spends most of its ~2 s starting up."""
    with ThreadPoolExecutor(len(runs)) as pool:
        return list(pool.map(lambda run: run(), runs))


def scram_credential(mechanism: str, password: str, iterations: int | None = None) -> str:
    """A kafka-configs.sh ``--add-config`` value for a SCRAM credential."""
    fields = ([f"iterations={iterations}"] if iterations else []) + [f"password={password}"]
    return f"{mechanism}=[{','.join(fields)}]"


def user(name: str) -> tuple[str, ...]:
    return ("--entity-type", "users", "--entity-name", name)


def pattern(resource_type: str, name: str, pattern_type: str = "LITERAL") -> str:
    return f"ResourcePattern(resourceType={resource_type}, name={name}, patternType={pattern_type})"


def entry(principal: str, operation: str, permission: str = "ALLOW") -> str:
    return (
        f"(principal=User:{principal}, host=*, operation={operation}, permissionType={permission})"
    )


ACL_HEADER = re.compile(r"^(?:Adding|Current) ACLs for resource `(?P<pattern>.+)`:\s*$")


def acl_listing(text: str) -> dict[str, set[str]]:
    """kafka-acls.sh's report: each resource pattern with its ACL entries.

    The tool prints them from Java hash sets, in an order that changes between runs.
    """
    listing: dict[str, set[str]] = {}
    entries: set[str] = set()
    for line in text.splitlines():
        if header := ACL_HEADER.match(line):
            entries = listing.setdefault(header["pattern"], set())
        elif line.strip().startswith("(principal="):
            entries.add(line.strip())
    return listing


def scram_mechanisms(text: str, name: str) -> set[str]:
    """The mechanisms kafka-configs.sh --describe lists for user ``name`` (Kafka orders them by
    a hash map of enums, which differs between runs)."""
    prefix = f"SCRAM credential configs for user-principal '{name}' are "
    [line] = [line for line in text.splitlines() if line.startswith(prefix)]
    return set(line.removeprefix(prefix).split(", "))


def events(result: ToolResult) -> list[dict[str, Any]]:
    """The JSON lines a verifiable producer or consumer printed."""
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def unique(prefix: str) -> str:
    """A name no other test uses (topics, groups)."""
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def test_scram_credentials_with_kafka_configs(operator: Operator) -> None:
    """kafka-configs.sh adds carol's SCRAM credentials, describes them, and deletes one; carol
    logs in with each mechanism she has, and not with the one deleted."""
    both = (
        f"{scram_credential('SCRAM-SHA-256', 'carol-secret', 8192)},"
        f"{scram_credential('SCRAM-SHA-512', 'carol-secret')}"
    )
    refused = operator.configs("--alter", "--add-config", both, *user("carol"))
    # Kafka refuses two mechanisms for one user in one AlterUserScramCredentials request.
    assert refused.returncode == 1, refused.describe()
    assert (
        "DuplicateResourceException: A user credential cannot be altered twice in the same request"
        in refused.stderr
    ), refused.describe()

    for credential in (
        scram_credential("SCRAM-SHA-256", "carol-secret", 8192),
        scram_credential("SCRAM-SHA-512", "carol-secret"),
    ):
        added = operator.configs("--alter", "--add-config", credential, *user("carol")).check()
        assert added.stdout == "Completed updating config for user carol.\n", added.describe()

    described = operator.configs("--describe", "--entity-type", "users").check()
    assert scram_mechanisms(described.stdout, "carol") == {
        "SCRAM-SHA-256=iterations=8192",
        "SCRAM-SHA-512=iterations=4096",
    }, described.describe()

    scram = {
        m: operator.properties.sasl(m, "carol", "carol-secret")
        for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")
    }
    # Logged in with either mechanism; without ACLs carol sees no topic.
    for listed in concurrently(
        *(partial(operator.run, TOPIC_COMMAND, c, "--list") for c in scram.values())
    ):
        assert listed.check().stdout.split() == [], listed.describe()

    deleted = operator.configs("--alter", "--delete-config", "SCRAM-SHA-512", *user("carol"))
    assert deleted.check().stdout == "Completed updating config for user carol.\n"
    remaining = operator.configs("--describe", *user("carol")).check()
    assert remaining.stdout == (
        "SCRAM credential configs for user-principal 'carol' are SCRAM-SHA-256=iterations=8192\n"
    ), remaining.describe()

    refused = operator.run(TOPIC_COMMAND, scram["SCRAM-SHA-512"], "--list")
    assert refused.returncode == 1, refused.describe()
    assert (
        "Error while executing topic command : Authentication failed during authentication due "
        "to invalid credentials with SASL mechanism SCRAM-SHA-512\n" in refused.stdout
    ), refused.describe()


def test_client_quotas_with_kafka_configs(operator: Operator) -> None:
    """Quotas for a user, a client id and the default user, described as Kafka describes them;
    a fractional byte rate is refused by the broker; the default quota is deleted again."""
    rates = "producer_byte_rate=1024,consumer_byte_rate=2048"
    entities = {
        "user": ("--entity-type", "users", "--entity-name", "dan"),
        "client": ("--entity-type", "clients", "--entity-name", "app"),
        "default user": ("--entity-type", "users", "--entity-default"),
    }
    changes = {
        "user": rates,
        "client": rates + ",request_percentage=50",
        # Large enough not to slow the module's other users down.
        "default user": "consumer_byte_rate=104857600",
    }
    completed = {
        "user": "Completed updating config for user dan.\n",
        "client": "Completed updating config for client app.\n",
        "default user": "Completed updating default config for users in the cluster.\n",
    }
    alters = [partial(operator.configs, "--alter", "--add-config", changes[name], *entity)
              for name, entity in entities.items()]  # fmt: skip
    for name, altered in zip(entities, concurrently(*alters), strict=True):
        assert altered.check().stdout == completed[name], altered.describe()

    expected = {
        entities["user"]: (
            "Quota configs for user-principal 'dan' are "
            "consumer_byte_rate=2048.0, producer_byte_rate=1024.0\n"
        ),
        ("--entity-type", "clients"): (
            "Quota configs for client-id 'app' are "
            "consumer_byte_rate=2048.0, request_percentage=50.0, producer_byte_rate=1024.0\n"
        ),
        entities["default user"]: (
            "Quota configs for the default user-principal are consumer_byte_rate=1.048576E8\n"
        ),
    }
    describes = [partial(operator.configs, "--describe", *entity) for entity in expected]
    for output, described in zip(expected.values(), concurrently(*describes), strict=True):
        assert described.check().stdout == output, described.describe()

    fractional = operator.configs(
        "--alter", "--add-config", "producer_byte_rate=1.5", *entities["client"]
    )
    assert fractional.returncode == 1, fractional.describe()
    assert (
        "InvalidRequestException: producer_byte_rate cannot be a fractional value.\n"
        in fractional.stderr
    ), fractional.describe()

    deleted = operator.configs(
        "--alter", "--delete-config", "consumer_byte_rate", *entities["default user"]
    ).check()
    assert deleted.stdout == completed["default user"], deleted.describe()
    described = operator.configs("--describe", *entities["default user"]).check()
    assert described.stdout == "", described.describe()


def test_acls_with_kafka_acls(operator: Operator) -> None:
    """bob, before any ACL, sees no topic and may not write; kafka-acls.sh grants him Read and
    Write on a topic and Read on a group, lists them, denies Write (a DENY wins) and removes
    the lot; his console producer and consumer are refused or served accordingly."""
    topic, group = operator.create_topic(unique("acl")), unique("acl")
    bob = operator.properties.sasl("PLAIN", "bob")
    refused = f"TopicAuthorizationException: Not authorized to access topics: [{topic}]\n"

    listed, before = concurrently(
        partial(operator.run, TOPIC_COMMAND, bob, "--list"),
        partial(operator.produce, bob, topic, ["before"]),
    )
    assert listed.check().stdout.split() == [], listed.describe()
    assert (
        f"ERROR Error when sending message to topic {topic} with key: null, value: 6 bytes with "
        "error: (org.apache.kafka.clients.producer.internals.ErrorLoggingCallback)\n"
        f"org.apache.kafka.common.errors.{refused}" in before.stderr
    ), before.describe()

    # Write is no group operation: Read on the group is a second command.
    on_topic, on_group = concurrently(
        partial(operator.acls, "--add", "--allow-principal", "User:bob", "--operation", "Read",
                "--operation", "Write", "--topic", topic),
        partial(operator.acls, "--add", "--allow-principal", "User:bob", "--operation", "Read",
                "--group", group),
    )  # fmt: skip
    topic_acls = {entry("bob", "READ"), entry("bob", "WRITE")}
    assert acl_listing(on_topic.check().stdout) == {pattern("TOPIC", topic): topic_acls}
    assert acl_listing(on_group.check().stdout) == {pattern("GROUP", group): {entry("bob", "READ")}}
    listed = operator.acls("--list", "--topic", topic).check()
    assert listed.stdout.startswith("Current ACLs for resource"), listed.describe()
    assert acl_listing(listed.stdout) == {pattern("TOPIC", topic): topic_acls}, listed.describe()

    after = operator.produce(bob, topic, ["one", "two"])
    assert "ERROR" not in after.stderr, after.describe()
    consumed = operator.consume(bob, topic, group, 2)
    assert consumed.stdout.splitlines() == ["one", "two"], consumed.describe()

    denied = operator.acls("--add", "--deny-principal", "User:bob", "--operation", "Write",
                           "--topic", topic).check()  # fmt: skip
    assert acl_listing(denied.stdout) == {pattern("TOPIC", topic): {entry("bob", "WRITE", "DENY")}}
    # Not idempotent: an idempotent producer would first need Write on some topic (or
    # IdempotentWrite) for its producer id, and bob's only Write ACL is denied.
    after_deny = operator.produce(bob, topic, ["three"], "--command-property",
                                  "enable.idempotence=false")  # fmt: skip
    assert refused in after_deny.stderr, after_deny.describe()

    operator.acls("--remove", "--force", "--topic", topic).check()
    gone = operator.acls("--list", "--topic", topic).check()
    assert gone.stdout == "", gone.describe()


def test_a_prefixed_acl_with_kafka_acls(operator: Operator) -> None:
    """Write granted on a topic-name prefix lets bob produce to a topic under it, and kafka-acls.sh
    lists the prefixed ACL among those that match the topic."""
    prefix = f"{unique('prefixed')}-"
    prefixed_topic = operator.create_topic(f"{prefix}orders")
    bob = operator.properties.sasl("PLAIN", "bob")
    granted = operator.acls(
        "--add", "--allow-principal", "User:bob", "--operation", "Write", "--topic", prefix,
        "--resource-pattern-type", "prefixed",
    ).check()  # fmt: skip
    prefixed = {pattern("TOPIC", prefix, "PREFIXED"): {entry("bob", "WRITE")}}
    assert acl_listing(granted.stdout) == prefixed, granted.describe()
    matching = operator.acls("--list", "--topic", prefixed_topic,
                             "--resource-pattern-type", "match").check()  # fmt: skip
    assert acl_listing(matching.stdout) == prefixed, matching.describe()
    written = operator.produce(bob, prefixed_topic, ["prefixed"])
    assert "ERROR" not in written.stderr, written.describe()


@pytest.mark.parametrize("listener", ["SASL_SSL", "SSL"])
def test_verifiable_producer_and_consumer(operator: Operator, listener: str) -> None:
    """alice, granted the producer and consumer roles with kafka-acls.sh, produces with the
    verifiable producer and reads every acknowledged value back in a consumer group: with
    SCRAM-SHA-512 over SASL_SSL, and with her client certificate over SSL."""
    if listener == "SASL_SSL":
        credential = scram_credential("SCRAM-SHA-512", USERS["alice"])
        operator.configs("--alter", "--add-config", credential, *user("alice")).check()
        alice = operator.properties.sasl("SCRAM-SHA-512", "alice")
    else:
        alice = operator.properties.mutual_tls("alice")
    topic, group, count = operator.create_topic(unique("verifiable"), 2), unique("verifiable"), 200
    operator.acls("--add", "--allow-principal", "User:alice", "--producer", "--consumer",
                  "--topic", topic, "--group", group).check()  # fmt: skip

    produced = operator.run(VERIFIABLE_PRODUCER, alice, "--topic", topic,
                            "--max-messages", str(count)).check()  # fmt: skip
    sent = events(produced)
    acked = [e["value"] for e in sent if e["name"] == "producer_send_success"]
    assert sorted(acked, key=int) == [str(i) for i in range(count)], produced.describe()
    [summary] = [e for e in sent if e["name"] == "tool_data"]
    assert (summary["sent"], summary["acked"]) == (count, count), produced.describe()

    consumed = operator.run(VERIFIABLE_CONSUMER, alice, "--topic", topic, "--group-id", group,
                            "--max-messages", str(count), "--verbose").check()  # fmt: skip
    received = events(consumed)
    values = [e["value"] for e in received if e["name"] == "record_data"]
    assert sorted(values, key=int) == sorted(acked, key=int), consumed.describe()
    commits = [e for e in received if e["name"] == "offsets_committed"]
    assert commits and all(c["success"] for c in commits), consumed.describe()
    committed = {(o["topic"], o["partition"]): o["offset"] for c in commits for o in c["offsets"]}
    assert sum(committed.values()) == count, consumed.describe()


def test_console_tools_with_oauthbearer(operator: Operator) -> None:
    """The console producer and consumer log in with Kafka's unsecured OAUTHBEARER token for
    alice and work within the ACLs granted to User:alice."""
    topic, group = operator.create_topic(unique("oauth")), unique("oauth")
    operator.acls("--add", "--allow-principal", "User:alice", "--producer", "--consumer",
                  "--topic", topic, "--group", group).check()  # fmt: skip
    alice = operator.properties.sasl("OAUTHBEARER", "alice")
    pairs = [(f"key{i}", f"value {i}") for i in range(20)]
    produced = operator.produce(alice, topic, [f"{k}\t{v}" for k, v in pairs],
                                "--reader-property", "parse.key=true")  # fmt: skip
    assert "ERROR" not in produced.stderr, produced.describe()
    consumed = operator.consume(alice, topic, group, len(pairs),
                                "--formatter-property", "print.key=true")  # fmt: skip
    assert consumed.stdout.splitlines() == [f"{k}\t{v}" for k, v in pairs], consumed.describe()
    assert f"Processed a total of {len(pairs)} messages" in consumed.stderr, consumed.describe()


def test_a_wrong_password_gets_the_brokers_message(operator: Operator) -> None:
    """The Java client reports the broker's SASL_AUTHENTICATION_FAILED message: PLAIN's from
    the console producer, SCRAM's from the console consumer."""
    topic = operator.create_topic(unique("password"))
    plain = operator.properties.sasl("PLAIN", "bob", "wrong")
    scram = operator.properties.sasl("SCRAM-SHA-512", "bob", "wrong")
    produced, consumed = concurrently(
        partial(operator.produce, plain, topic, ["x"]),
        partial(operator.consume, scram, topic, unique("password"), 1),
    )
    exception = "org.apache.kafka.common.errors.SaslAuthenticationException: "
    assert f"{exception}Authentication failed: Invalid username or password\n" in produced.stderr, (
        produced.describe()
    )
    assert (
        f"{exception}Authentication failed during authentication due to invalid credentials with "
        "SASL mechanism SCRAM-SHA-512\n" in consumed.stderr
    ), consumed.describe()


def test_mutual_tls_refuses_a_client_without_a_certificate(operator: Operator) -> None:
    """The SSL listener requires a client certificate: the broker's TLS alert makes the Java
    client fail at once with an SslAuthenticationException (Kafka's JSSE sends bad_certificate,
    OpenSSL certificate_required; the client's message is the same)."""
    # Short timeouts: a broker that closed without its alert would have the client retry.
    no_certificate = operator.properties.write("no-certificate", "SSL", {
        "security.protocol": "SSL", **trust_settings(operator.properties.credentials),
        "request.timeout.ms": "3000", "default.api.timeout.ms": "3000",
    })  # fmt: skip
    refused = operator.run(TOPIC_COMMAND, no_certificate, "--list")
    assert refused.returncode == 1, refused.describe()
    assert (
        "Error while executing topic command : Failed to process post-handshake messages\n"
        in refused.stdout
    ), refused.describe()
