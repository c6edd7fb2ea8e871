"""OAUTHBEARER with signed tokens (Kafka's JWKS validator) and re-authentication (KIP-368).

The identity provider is a key pair and its key set in a file (a ``file:`` JWKS URL, which
Kafka reads too). librdkafka gets its tokens from an ``oauth_cb``, as applications do.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.helpers.brokers import ManagedBroker
from tests.helpers.secure_broker import Credentials, SecureKpyBroker
from tests.helpers.secure_clients import (
    confluent_config,
    grant,
    new_topic,
    oauth_refused,
    running_secure_broker,
)

ISSUER = "https://idp.test"
AUDIENCE = "kafka"
VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"


def key_pair() -> tuple[Any, dict[str, Any]]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    return key, jwk | {"kid": f"k-{uuid.uuid4().hex[:6]}", "use": "sig", "alg": "RS256"}


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, str, Path]:
    key, jwk = key_pair()
    jwks = tmp_path_factory.mktemp("idp") / "jwks.json"
    jwks.write_text(json.dumps({"keys": [jwk]}))
    return key, jwk["kid"], jwks


@pytest.fixture(scope="module")
def secured(
    tmp_path_factory: pytest.TempPathFactory, provider: tuple[Any, str, Path]
) -> Iterator[tuple[ManagedBroker, Credentials]]:
    credentials = Credentials(tmp_path_factory.mktemp("credentials"))
    with running_secure_broker(
        tmp_path_factory.mktemp("secured"),
        credentials,
        {
            "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": (
                VALIDATOR
            ),
            "sasl.oauthbearer.jwks.endpoint.url": provider[2].as_uri(),
            "sasl.oauthbearer.expected.issuer": ISSUER,
            "sasl.oauthbearer.expected.audience": AUDIENCE,
            "connections.max.reauth.ms": 3000,
        },
    ) as broker:
        yield broker, credentials


def token(key: Any, kid: str, **changes: Any) -> tuple[str, float]:
    now = time.time()
    claims = {"sub": "alice", "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 600}
    claims |= changes
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": kid}), claims["exp"]


def oauth_config(broker: Any, minted: tuple[str, float], errors: list[Any]) -> dict[str, Any]:
    return {
        "bootstrap.servers": broker.bootstrap_for("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "oauth_cb": lambda _: minted,
        "error_cb": errors.append,
    }


def test_a_signed_token_is_accepted(
    secured: tuple[ManagedBroker, Credentials], provider: tuple[Any, str, Path]
) -> None:
    from confluent_kafka import Producer

    broker, _ = secured
    topic = new_topic(broker)
    grant(broker, "alice", topic, "WRITE")
    errors: list[Any] = []
    producer = Producer(oauth_config(broker, token(provider[0], provider[1]), errors))
    producer.produce(topic, b"signed")
    assert producer.flush(20) == 0, errors


@pytest.mark.parametrize(
    "problem", ["another key", "expired", "another audience", "another issuer"]
)
def test_a_bad_token_is_refused(
    secured: tuple[ManagedBroker, Credentials], provider: tuple[Any, str, Path], problem: str
) -> None:
    broker, _ = secured
    key, kid, _ = provider
    minted, _ = {
        "another key": lambda: token(key_pair()[0], kid),
        "expired": lambda: token(key, kid, iat=time.time() - 7200, exp=time.time() - 3600),
        "another audience": lambda: token(key, kid, aud="not-kafka"),
        "another issuer": lambda: token(key, kid, iss="https://elsewhere.test"),
    }[problem]()
    assert oauth_refused(broker, minted) == {"status": "invalid_token"}


def test_clients_reauthenticate_before_their_session_ends(
    secured: tuple[ManagedBroker, Credentials],
) -> None:
    """connections.max.reauth.ms=3000: a producer writing for three sessions' time keeps
    going, re-authenticating on its connections, and is never refused."""
    from confluent_kafka import Producer

    broker, credentials = secured
    topic = new_topic(broker)
    grant(broker, "alice", topic, "WRITE")
    producer = Producer(
        confluent_config(broker, credentials, "SASL_PLAINTEXT", "alice", "SCRAM-SHA-256")
    )
    log_before = len(broker.log_text())
    acked: list[Any] = []
    deadline = time.monotonic() + 9
    while time.monotonic() < deadline:
        producer.produce(topic, b"x", on_delivery=lambda err, _: acked.append(err))
        producer.flush(10)
        time.sleep(0.2)
    assert acked and all(err is None for err in acked)
    if isinstance(broker, SecureKpyBroker):
        since = broker.log_text()[log_before:]
        assert "Failed authentication" not in since
        assert "expired without re-authentication" not in since
