"""SASL/PLAIN: Kafka's PlainSaslServer (ported PlainSaslServerTest) and a PLAIN client.

Messages are Kafka 4.4's, which its PlainSaslServer sends to the client as they are.
"""

from __future__ import annotations

import asyncio

import pytest
from aiokafka.conn import SaslPlainAuthenticator
from kafka.net.sasl.plain import SaslMechanismPlain

from kpybroker.security.sasl import plain
from kpybroker.security.sasl.jaas import parse_jaas_config
from kpybroker.security.sasl.mechanism import SaslAuthenticationError
from kpybroker.security.sasl.plain import PlainSaslClient, PlainSaslServer, plain_users

USERS = {"userA": "passwordA", "userB": "passwordB"}


def message(authorization_id: str, username: str, password: str) -> bytes:
    return f"{authorization_id}\0{username}\0{password}".encode()


def evaluate(server: PlainSaslServer, response: bytes) -> bytes:
    return asyncio.run(server.evaluate(response))


def failure(server: PlainSaslServer, response: bytes) -> str:
    with pytest.raises(SaslAuthenticationError) as error:
        evaluate(server, response)
    assert not server.is_complete
    return str(error.value)


@pytest.mark.parametrize("authorization_id", ["", "userA"])
def test_success(authorization_id: str) -> None:
    server = PlainSaslServer(USERS)
    assert evaluate(server, message(authorization_id, "userA", "passwordA")) == b""
    assert server.is_complete
    assert server.authorization_id == "userA"
    assert server.credential_expiry_ms is None


def test_authorization_id_other_than_username() -> None:
    assert failure(PlainSaslServer(USERS), message("userB", "userA", "passwordA")) == (
        "Authentication failed: Client requested an authorization id that is different "
        "from username"
    )


@pytest.mark.parametrize(
    ("username", "password"), [("userA", "passwordB"), ("nobody", "passwordA"), ("userA", "p")]
)
def test_unknown_user_and_wrong_password_read_the_same(username: str, password: str) -> None:
    assert failure(PlainSaslServer(USERS), message("", username, password)) == (
        "Authentication failed: Invalid username or password"
    )


@pytest.mark.parametrize(
    ("response", "error"),
    [
        (message("", "", ""), "Authentication failed: username not specified"),
        (message("", "", "p"), "Authentication failed: username not specified"),
        (message("", "u", ""), "Authentication failed: password not specified"),
        (message("a", "", ""), "Authentication failed: username not specified"),
        (message("a", "", "p"), "Authentication failed: username not specified"),
        (message("a", "u", ""), "Authentication failed: password not specified"),
        (b"a\0u\0p\0", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
        (b"a\0u\0p\0x\0y", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
        (b"\0u", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
        (b"", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
    ],
)
def test_malformed_responses(response: bytes, error: str) -> None:
    assert failure(PlainSaslServer(USERS), response) == error


def test_the_password_may_hold_anything_but_nul() -> None:
    server = PlainSaslServer({"ü": "p a=s,s wörd"})
    evaluate(server, message("", "ü", "p a=s,s wörd"))
    assert server.authorization_id == "ü"


def test_a_user_with_an_empty_password_cannot_log_in() -> None:
    assert failure(PlainSaslServer({"bob": ""}), message("", "bob", "x")) == (
        "Authentication failed: Invalid username or password"
    )


def test_passwords_are_compared_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    compared = []

    def compare_digest(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return a == b

    monkeypatch.setattr(plain.hmac, "compare_digest", compare_digest)
    evaluate(PlainSaslServer(USERS), message("", "userA", "passwordA"))
    assert compared == [(b"passwordA", b"passwordA")]


def test_a_password_check_instead_of_a_user_list() -> None:
    seen = []

    def check(username: str, password: str) -> bool:
        seen.append((username, password))
        return password == "right"

    server = PlainSaslServer(check)
    evaluate(server, message("", "carol", "right"))
    assert server.authorization_id == "carol"
    assert failure(PlainSaslServer(check), message("", "carol", "wrong")) == (
        "Authentication failed: Invalid username or password"
    )
    assert seen == [("carol", "right"), ("carol", "wrong")]


def test_a_password_check_that_breaks() -> None:
    def check(username: str, password: str) -> bool:
        raise OSError("user store unreachable")

    assert failure(PlainSaslServer(check), message("", "carol", "x")) == (
        "Authentication failed: credentials for user could not be verified"
    )


def test_authorization_id_before_completion() -> None:
    with pytest.raises(RuntimeError, match="Authentication exchange has not completed"):
        _ = PlainSaslServer(USERS).authorization_id


def test_users_from_the_listener_jaas_config() -> None:
    entries = parse_jaas_config(
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret" '
        'user_admin="admin-secret" user_alice="alice-secret" "user_a b"=x;'
        'other.Module required user_mallory="m";'
        'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="second";'
    )
    assert plain_users(entries) == {"admin": "admin-secret", "alice": "alice-secret", "a b": "x"}


def test_client_initial_response() -> None:
    client = PlainSaslClient("alice", "alice-secret")
    assert not client.is_complete
    assert client.initial_response() == b"\0alice\0alice-secret"
    assert client.is_complete
    with pytest.raises(RuntimeError):
        client.evaluate(b"")
    assert PlainSaslClient("a", "p", authorization_id="a").initial_response() == b"a\0a\0p"


def test_client_against_server() -> None:
    server = PlainSaslServer(USERS)
    assert evaluate(server, PlainSaslClient("userB", "passwordB").initial_response()) == b""
    assert server.authorization_id == "userB"


def test_kafka_python_client() -> None:
    client = SaslMechanismPlain(sasl_plain_username="userA", sasl_plain_password="passwordA")
    server = PlainSaslServer(USERS)
    client.receive(evaluate(server, client.auth_bytes()))
    assert client.is_authenticated()
    assert server.authorization_id == "userA"


def test_aiokafka_client() -> None:
    server = PlainSaslServer(USERS)

    async def exchange() -> None:
        authenticator = SaslPlainAuthenticator(
            loop=asyncio.get_running_loop(),
            sasl_plain_username="userB",
            sasl_plain_password="passwordB",
        )
        token, _expects_answer = await authenticator.step(None)
        assert await authenticator.step(await server.evaluate(token)) is None

    asyncio.run(exchange())
    assert server.authorization_id == "userB"
