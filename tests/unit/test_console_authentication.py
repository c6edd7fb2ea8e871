"""The console's authentication: passwords checked by the broker's own SASL servers, and the
authenticated user as the principal of each request's Kafka calls."""

from __future__ import annotations

import asyncio
import base64
import logging
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from kpybroker.config import BrokerConfig
from kpybroker.config.broker_table import BROKER_CONFIGS
from kpybroker.console.app import console_application
from kpybroker.console.authentication import BasicAuthentication, authentication_required
from kpybroker.console.settings import ConsoleSettings
from kpybroker.console.throughput import Sample, ThroughputSampler
from kpybroker.security.listener_security import listener_security
from kpybroker.security.principal import ANONYMOUS, KafkaPrincipal
from kpybroker.security.sasl.password_check import (
    PasswordRejected,
    check_password,
    password_mechanisms,
)
from kpybroker.security.sasl.scram_credentials import ScramCredential, ScramMechanism
from tests.unit.test_console_views import fake_kafka

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
#: (mechanism name, user) -> credential: alice has both mechanisms, bob SHA-512 only.
STORED = {
    (SHA256.mechanism_name, "alice"): SHA256.credential("alice-secret", 4096),
    (SHA512.mechanism_name, "alice"): SHA512.credential("alice-secret", 4096),
    (SHA512.mechanism_name, "bob"): SHA512.credential("bob-secret", 4096),
}
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_carol="carol-secret";'
)
SECURED = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": (
        "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    ),
}


def lookup(mechanism: str, user: str) -> ScramCredential | None:
    return STORED.get((mechanism, user))


def secured_settings(**overrides: str) -> ConsoleSettings:
    """The console settings of a broker with a SASL listener, as the broker makes them."""
    config = BrokerConfig(SECURED | overrides)
    listeners = {lst.name: listener_security(config, lst, lookup) for lst in config.listeners()}
    return ConsoleSettings.from_config(config, listeners, lookup)


def check(user: str, password: str) -> str:
    settings = secured_settings()
    assert settings.authentication is not None
    return asyncio.run(settings.authentication.check(user, password))


@pytest.mark.parametrize(
    ("mechanism", "user"), [(SHA256, "alice"), (SHA512, "alice"), (SHA512, "bob")]
)
def test_the_right_password_of_each_scram_mechanism(mechanism: ScramMechanism, user: str) -> None:
    only = [m for m in password_mechanisms({}, lookup) if m.name == mechanism.mechanism_name]
    assert asyncio.run(check_password(only, user, f"{user}-secret")) == user


def test_a_wrong_password_and_an_unknown_user_are_refused_with_the_servers_reasons() -> None:
    with pytest.raises(PasswordRejected) as wrong:
        check("alice", "not-her-secret")
    assert "SCRAM-SHA-256 (stored credentials): Invalid client credentials" in str(wrong.value)
    assert "SCRAM-SHA-512 (stored credentials): Invalid client credentials" in str(wrong.value)
    assert (
        "PLAIN (listener SASL_PLAINTEXT): Authentication failed: Invalid username or password"
        in str(wrong.value)
    )
    with pytest.raises(PasswordRejected) as unknown:
        check("mallory", "anything")
    assert (
        "SCRAM-SHA-256 (stored credentials): Authentication failed: Invalid user credentials"
        in str(unknown.value)
    )
    with pytest.raises(PasswordRejected):
        check("bob", "alice-secret")  # another user's password


def test_plain_users_of_the_sasl_listeners_jaas_config() -> None:
    assert check("carol", "carol-secret") == "carol"
    with pytest.raises(PasswordRejected):
        check("carol", "wrong")
    # The listener's own login (username/password) is not one of its users.
    with pytest.raises(PasswordRejected):
        check("admin", "admin-secret")


def test_authentication_follows_the_listeners_protocols_unless_forced() -> None:
    assert authentication_required("auto", ["PLAINTEXT", "SASL_SSL"])
    assert authentication_required("auto", ["SASL_PLAINTEXT"])
    assert not authentication_required("auto", ["PLAINTEXT", "SSL"])
    assert authentication_required("required", ["PLAINTEXT"])
    assert not authentication_required("none", ["SASL_SSL"])
    assert BROKER_CONFIGS["console.authentication"].default == "auto"
    assert secured_settings().authentication is not None
    assert secured_settings(**{"console.authentication": "none"}).authentication is None
    plain = BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0"})
    assert ConsoleSettings.from_config(plain, {}, lookup).authentication is None


class Recorder:
    """The console's ``kafka_as``: records who each request's calls act as."""

    def __init__(self) -> None:
        self.callers: list[tuple[KafkaPrincipal, str]] = []
        self.kafka = fake_kafka()

    def __call__(self, principal: KafkaPrincipal, host: str) -> Any:
        self.callers.append((principal, host))
        return self.kafka


def basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


async def serve(authentication: BasicAuthentication | None, recorder: Recorder) -> TestClient:
    async def no_totals() -> dict[str, tuple[int, int]]:
        return {}

    app = console_application(recorder, ThroughputSampler(no_totals), False, authentication)
    client = TestClient(TestServer(app))
    await client.start_server()
    return client


def test_every_path_needs_credentials_and_the_user_is_the_principal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> None:
        recorder = Recorder()
        authentication = secured_settings().authentication
        client = await serve(authentication, recorder)
        try:
            for path in ("/", "/static/console.js", "/api/topics", "/api/throughput"):
                refused = await client.get(path)
                assert refused.status == 401, path
                assert refused.headers["WWW-Authenticate"] == 'Basic realm="kpybroker"'
            assert (
                await client.get("/api/topics", headers=basic("alice", "Wr0ng-guess"))
            ).status == 401
            malformed = {"Authorization": "Basic !!!"}
            assert (await client.get("/api/topics", headers=malformed)).status == 401
            assert recorder.callers == []
            answer = await client.get("/api/topics", headers=basic("alice", "alice-secret"))
            assert answer.status == 200
            assert [t["name"] for t in await answer.json()] == ["orders"]
            assert recorder.callers == [(KafkaPrincipal.user("alice"), "127.0.0.1")]
            page = await client.get("/", headers=basic("carol", "carol-secret"))
            assert page.status == 200
        finally:
            await client.close()

    with caplog.at_level(logging.INFO, logger="kpybroker.console.authentication"):
        asyncio.run(scenario())
    failures = [r.getMessage() for r in caplog.records]
    assert len(failures) == 2
    assert failures[0].startswith("Failed authentication with 127.0.0.1 (console: SCRAM-SHA-256 ")
    assert "Invalid client credentials" in failures[0]
    assert "Wr0ng-guess" not in failures[0]  # the attempted password is not logged


def test_without_authentication_requests_act_as_anonymous_from_their_address() -> None:
    async def scenario() -> None:
        recorder = Recorder()
        client = await serve(None, recorder)
        try:
            assert (await client.get("/api/groups")).status == 200
        finally:
            await client.close()
        assert recorder.callers == [(ANONYMOUS, "127.0.0.1")]

    asyncio.run(scenario())


def test_throughput_shows_only_the_topics_the_viewer_may_describe() -> None:
    sample = Sample(
        time=10.0,
        seconds=1.0,
        records_per_s={"seen": 5.0, "hidden": 7.0},
        bytes_per_s={"seen": 50.0, "hidden": 70.0},
    )
    assert sample.as_json()["records_per_s"] == 12.0
    visible = sample.as_json({"seen"})
    assert (visible["records_per_s"], visible["bytes_per_s"]) == (5.0, 50.0)
    assert list(visible["topics"]) == ["seen"]
