"""What a client without the right credentials or permissions gets: Kafka's error, and no more.

Each case is a raw connection or a stock client doing something it may not; each gets
Kafka's answer (or the connection closed where Kafka closes it), the broker logs it once,
and a well-behaved client on another connection is served as before.
"""

from __future__ import annotations

import contextlib
import re
import socket
import ssl
import struct
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kpybroker.protocol.framing import encode_request
from kpybroker.protocol.messages.metadata import MetadataRequest
from kpybroker.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from kpybroker.protocol.messages.sasl_handshake import SaslHandshakeRequest
from tests.helpers.brokers import ManagedBroker
from tests.helpers.groups_wire import Wire
from tests.helpers.secure_broker import Credentials, SecureKpyBroker
from tests.helpers.secure_clients import (
    acl,
    add_acls,
    confluent_config,
    grant,
    new_topic,
    oauth_refused,
    running_secure_broker,
)
from tests.helpers.wire import ConnectionClosed, RawConnection

FAILED = re.compile(r"Failed authentication with \S+:(\d+) ")


@pytest.fixture(scope="module")
def credentials(tmp_path_factory: pytest.TempPathFactory) -> Credentials:
    return Credentials(tmp_path_factory.mktemp("credentials"))


@pytest.fixture(scope="module")
def secured(
    tmp_path_factory: pytest.TempPathFactory, credentials: Credentials
) -> Iterator[ManagedBroker]:
    with running_secure_broker(
        tmp_path_factory.mktemp("secured"),
        credentials,
        {"connection.failed.authentication.delay.ms": 300},
    ) as broker:
        yield broker


def wire(broker: Any, listener: str = "SASL_PLAINTEXT") -> Wire:
    """A raw connection to one of the broker's secured listeners."""
    return Wire(broker.bootstrap_for(listener), client_id="negative-test")


def not_answered(connection: RawConnection) -> bool:
    """Closed with no Kafka answer: at most a TLS alert record (Kafka's engine sends one)."""
    received = b""
    connection.sock.settimeout(10)
    try:
        while chunk := connection.sock.recv(4096):
            received += chunk
    except ConnectionResetError:
        pass
    finally:
        connection.close()
    return not received or received[0] == 0x15  # TLS alert


def still_served(broker: Any, credentials: Credentials) -> None:
    """A good client, on a connection of its own, is answered."""
    from confluent_kafka.admin import AdminClient

    config = confluent_config(broker, credentials, "SASL_PLAINTEXT", "admin", "SCRAM-SHA-256")
    assert AdminClient(config).list_topics(timeout=10).brokers


def logged_failures(broker: ManagedBroker, port: int) -> list[str]:
    """The broker's "Failed authentication" lines for the client port ``port``."""
    return [
        line
        for line in broker.log_text().splitlines()
        if (found := FAILED.search(line)) and int(found.group(1)) == port
    ]


def failed_once(broker: ManagedBroker, sock_port: int) -> None:
    """kpybroker logs one line for the failed attempt (Kafka logs it too, under its own
    channel id rather than the client's port: not checked there)."""
    if not isinstance(broker, SecureKpyBroker):
        return
    deadline = time.monotonic() + 10
    while not logged_failures(broker, sock_port) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(logged_failures(broker, sock_port)) == 1


# -- authentication ----------------------------------------------------------------------


def test_a_client_that_skips_the_handshake_is_closed_without_an_answer(
    secured: ManagedBroker, credentials: Credentials
) -> None:
    with wire(secured) as connection:
        port = connection.sock.getsockname()[1]
        connection.send_request(MetadataRequest(topics=None), 12)
        connection.expect_closed()
    failed_once(secured, port)
    still_served(secured, credentials)


def test_an_oversized_frame_before_authentication_is_refused(
    secured: ManagedBroker, credentials: Credentials
) -> None:
    with wire(secured) as connection:
        port = connection.sock.getsockname()[1]
        connection.send(struct.pack(">i", 100 * 1024 * 1024) + b"\0" * 1024)
        connection.expect_closed()
    failed_once(secured, port)
    still_served(secured, credentials)


def test_a_malformed_authenticate_request_closes_the_connection(
    secured: ManagedBroker, credentials: Credentials
) -> None:
    with wire(secured) as connection:
        shake = connection.call(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 1)
        assert shake.error_code == 0
        frame = bytearray(
            encode_request(SaslAuthenticateRequest(auth_bytes=b"x" * 64), 1, 2, "bad")
        )
        body = 4 + 2 + 2 + 4 + 2 + len("bad")  # size, api key, version, correlation id, client id
        frame[body : body + 4] = struct.pack(">i", 1 << 30)  # auth_bytes claims a gigabyte
        connection.send(bytes(frame))
        connection.expect_closed()
    still_served(secured, credentials)


def test_garbage_instead_of_a_request_is_refused(
    secured: ManagedBroker, credentials: Credentials
) -> None:
    with wire(secured) as connection:
        connection.send(struct.pack(">i", 8) + b"\x60\x06garbage"[:8])
        connection.expect_closed()
    still_served(secured, credentials)


def test_an_unknown_mechanism_is_answered_with_the_ones_offered(secured: ManagedBroker) -> None:
    with wire(secured) as connection:
        answer = connection.call(SaslHandshakeRequest(mechanism="GSSAPI"), 1)
        assert answer.error_code == 33  # UNSUPPORTED_SASL_MECHANISM
        # In the order of the Java HashMap Kafka keeps them in.
        assert answer.mechanisms == ["PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256", "OAUTHBEARER"]
        connection.expect_closed()


def test_an_expired_or_unusable_token_is_refused_as_kafka_refuses_it(
    secured: ManagedBroker,
) -> None:
    import base64
    import json

    def unsecured(claims: dict[str, Any]) -> str:
        def part(value: dict[str, Any]) -> str:
            return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

        return f"{part({'alg': 'none'})}.{part(claims)}."

    now = time.time()
    for token in (unsecured({"sub": "alice", "iat": now - 7200, "exp": now - 3600}), "no.t.ok"):
        assert oauth_refused(secured, token) == {"status": "invalid_token"}


def test_a_plaintext_client_on_a_tls_listener_is_logged_and_closed(
    secured: ManagedBroker, credentials: Credentials
) -> None:
    connection = wire(secured, "SSL")
    port = connection.sock.getsockname()[1]
    connection.send_request(MetadataRequest(topics=None), 12)
    assert not_answered(connection)
    failed_once(secured, port)


def test_a_client_gone_during_the_tls_handshake_is_a_disconnection_not_a_failed_login(
    secured: ManagedBroker, credentials: Credentials
) -> None:
    """Closed before, or reset in the middle of, its handshake (a killed broker's connection
    to another, say): Kafka's EOFException, logged at DEBUG only."""
    host, port = secured.bootstrap_for("SSL").split(":")
    hello = client_hello()
    ports = []
    for sent in (b"", hello[: len(hello) // 2], hello):
        sock = socket.create_connection((host, int(port)))
        ports.append(sock.getsockname()[1])
        sock.sendall(sent)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST
        sock.close()
    still_served(secured, credentials)
    for client_port in ports:
        assert logged_failures(secured, client_port) == []


def client_hello() -> bytes:
    """The first flight of a TLS client's handshake, as bytes."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    outgoing = ssl.MemoryBIO()
    client = context.wrap_bio(ssl.MemoryBIO(), outgoing)
    with contextlib.suppress(ssl.SSLWantReadError):
        client.do_handshake()
    return outgoing.read()


def test_a_tls_client_without_a_certificate_is_refused_where_one_is_required(
    secured: ManagedBroker, credentials: Credentials
) -> None:
    context = ssl.create_default_context(cafile=str(credentials.ca_pem))
    connection = wire(secured, "SSL")
    connection.sock = context.wrap_socket(connection.sock, server_hostname="127.0.0.1")
    with pytest.raises((ssl.SSLError, ConnectionError, ConnectionClosed)), connection:
        connection.call(MetadataRequest(topics=None), 12)  # TLS 1.3: refused at the first read


# -- authorization: a DENY over an ALLOW, family by family ----------------------------


@pytest.fixture(scope="module")
def denied(secured: ManagedBroker) -> dict[str, str]:
    """bob is allowed everything on his resources, then denied one operation of each family."""
    names = {
        "produce": new_topic(secured),
        "fetch": new_topic(secured),
        "group": f"bob-group-{uuid.uuid4().hex[:6]}",
        "offsets": f"bob-offsets-{uuid.uuid4().hex[:6]}",
        "txn": f"bob-txn-{uuid.uuid4().hex[:6]}",
    }
    add_acls(
        secured,
        acl("TOPIC", "*", "bob", "ALL"),
        acl("GROUP", "*", "bob", "ALL"),
        acl("TRANSACTIONAL_ID", "*", "bob", "ALL"),
        acl("CLUSTER", "kafka-cluster", "bob", "IDEMPOTENT_WRITE"),
        acl("TOPIC", names["produce"], "bob", "WRITE", "DENY"),
        acl("TOPIC", names["fetch"], "bob", "READ", "DENY"),
        acl("GROUP", names["group"], "bob", "READ", "DENY"),
        acl("GROUP", names["offsets"], "bob", "DESCRIBE", "DENY"),
        acl("TRANSACTIONAL_ID", names["txn"], "bob", "WRITE", "DENY"),
        acl("CLUSTER", "kafka-cluster", "bob", "CREATE", "DENY"),
        acl("TOPIC", "bob-new-", "bob", "CREATE", "DENY", "PREFIXED"),
    )
    return names


def bob(broker: Any, credentials: Credentials) -> dict[str, Any]:
    return confluent_config(broker, credentials, "SASL_PLAINTEXT", "bob", "SCRAM-SHA-256")


def test_produce_denied(secured: ManagedBroker, credentials: Credentials, denied: dict) -> None:
    from confluent_kafka import KafkaError, Producer

    errors: list[Any] = []
    producer = Producer(bob(secured, credentials) | {"message.timeout.ms": 10_000})
    producer.produce(denied["produce"], b"x", on_delivery=lambda err, _: errors.append(err))
    producer.flush(20)
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]


def test_fetch_denied(secured: ManagedBroker, credentials: Credentials, denied: dict) -> None:
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(bob(secured, credentials) | {"group.id": "bob-fetch"})
    consumer.assign([TopicPartition(denied["fetch"], 0, 0)])
    try:
        error = None
        for _ in range(20):
            message = consumer.poll(1.0)
            if message is not None and message.error():
                error = message.error()
                break
        assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        consumer.close()


def test_group_denied(secured: ManagedBroker, credentials: Credentials, denied: dict) -> None:
    from confluent_kafka import Consumer, KafkaError

    consumer = Consumer(bob(secured, credentials) | {"group.id": denied["group"]})
    consumer.subscribe([denied["produce"]])
    try:
        error = None
        for _ in range(20):
            message = consumer.poll(1.0)
            if message is not None and message.error():
                error = message.error()
                break
        assert error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        consumer.close()


def test_offsets_denied(secured: ManagedBroker, credentials: Credentials, denied: dict) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(bob(secured, credentials))
    future = admin.list_consumer_group_offsets(
        [_group_request(denied["offsets"])], request_timeout=10
    )[denied["offsets"]]
    with pytest.raises(KafkaException) as refused:
        future.result(20)
    assert "GROUP_AUTHORIZATION_FAILED" in str(refused.value)


def _group_request(group: str) -> Any:
    from confluent_kafka import ConsumerGroupTopicPartitions

    return ConsumerGroupTopicPartitions(group)


def test_admin_denied(secured: ManagedBroker, credentials: Credentials, denied: dict) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(bob(secured, credentials))
    future = admin.create_topics([NewTopic(f"bob-new-{uuid.uuid4().hex[:6]}", 1, 1)])
    with pytest.raises(KafkaException) as refused:
        next(iter(future.values())).result(20)
    assert "TOPIC_AUTHORIZATION_FAILED" in str(refused.value)


def test_transactions_denied(
    secured: ManagedBroker, credentials: Credentials, denied: dict
) -> None:
    from confluent_kafka import KafkaException, Producer

    producer = Producer(bob(secured, credentials) | {"transactional.id": denied["txn"]})
    with pytest.raises(KafkaException) as refused:
        producer.init_transactions(20)
    assert "TRANSACTIONAL_ID_AUTHORIZATION_FAILED" in str(refused.value)


def test_each_denial_is_logged_once_and_grants_still_work(
    secured: ManagedBroker, credentials: Credentials, denied: dict
) -> None:
    from confluent_kafka import Producer

    topic = new_topic(secured)
    grant(secured, "bob", topic, "WRITE")
    producer = Producer(bob(secured, credentials))
    producer.produce(topic, b"fine")
    assert producer.flush(20) == 0
    if isinstance(secured, SecureKpyBroker):  # Kafka writes its audit log to a file of its own
        audit = [line for line in secured.log_text().splitlines() if "is Denied operation" in line]
        assert any(f"Topic:LITERAL:{denied['produce']}" in line for line in audit)


def test_a_client_cannot_write_lines_of_its_own_into_the_log(
    secured: ManagedBroker, credentials: Credentials
) -> None:
    """A malformed SCRAM message is quoted in the failure's reason; its line breaks are
    logged escaped, so the forged line never stands on a line of its own."""
    forged = "ERROR kpybroker forged by the client"
    with wire(secured) as connection:
        port = connection.sock.getsockname()[1]
        assert connection.call(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 1).error_code == 0
        token = f"alice\n{forged}\r".encode()  # not a client-first message at all
        answer = connection.call(SaslAuthenticateRequest(auth_bytes=token), 2)
        assert answer.error_code == 58  # SASL_AUTHENTICATION_FAILED
        connection.expect_closed()
    failed_once(secured, port)
    if isinstance(secured, SecureKpyBroker):
        (line,) = logged_failures(secured, port)
        assert "alice\\n" + forged + "\\r" in line
        assert not any(text.startswith(forged) for text in secured.log_text().splitlines())
    still_served(secured, credentials)
