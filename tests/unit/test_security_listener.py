"""A listener's security, and the broker's own as a client of its peers, from Kafka's keys."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kpybroker.config import BrokerConfig, ConfigError
from kpybroker.security.client_security import inter_broker_security
from kpybroker.security.listener_sasl import java_hash_map_order
from kpybroker.security.listener_security import listener_security
from kpybroker.security.principal import ANONYMOUS, KafkaPrincipal
from kpybroker.security.sasl.plain import PlainSaslClient
from kpybroker.security.sasl.scram import ScramSaslClient
from kpybroker.security.sasl.unsecured_jws import UnsecuredJwsValidator
from tests.helpers.certificates import CertificateAuthority

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="broker" password="b-secret" user_broker="b-secret" user_alice="a-secret";'
)
SCRAM_JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="broker" password="b-secret";'
)


def config(**settings: str) -> BrokerConfig:
    return BrokerConfig({k.replace("__", "."): v for k, v in settings.items()})


def listener(cfg: BrokerConfig, name: str):  # type: ignore[no-untyped-def]
    return next(item for item in cfg.listeners() if item.name == name)


def test_plaintext_needs_nothing() -> None:
    cfg = config()
    security = listener_security(cfg, listener(cfg, "PLAINTEXT"), lambda *_: None)
    assert security.tls is None and security.sasl is None
    assert security.certificate_principal(None) == ANONYMOUS


def test_sasl_settings_per_listener_and_mechanism() -> None:
    cfg = BrokerConfig(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
            ),
            "listener.name.sasl_plaintext.plain.connections.max.reauth.ms": "60000",
            "connection.failed.authentication.delay.ms": "250",
        }
    )
    security = listener_security(cfg, listener(cfg, "SASL_PLAINTEXT"), lambda *_: None)
    assert security.sasl is not None
    assert security.sasl.mechanisms == ("PLAIN", "OAUTHBEARER")  # Java's HashMap order
    assert security.sasl.reauth_ms("PLAIN") == 60_000
    assert security.sasl.reauth_ms("OAUTHBEARER") == 0
    assert security.failed_authentication_delay_ms == 250
    server = security.sasl.new_server("PLAIN")
    asyncio.run(server.evaluate(PlainSaslClient("alice", "a-secret").initial_response()))
    assert server.authorization_id == "alice"
    assert isinstance(security.sasl.new_server("OAUTHBEARER")._validator, UnsecuredJwsValidator)


def test_a_mechanism_without_its_jaas_entry_stops_the_broker_as_in_kafka() -> None:
    cfg = BrokerConfig(
        {
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256",
            "inter.broker.listener.name": "SASL_PLAINTEXT",
        }
    )
    with pytest.raises(ConfigError, match="Could not find a 'KafkaServer'"):
        listener_security(cfg, listener(cfg, "SASL_PLAINTEXT"), lambda *_: None)


def test_kerberos_is_refused_by_name() -> None:
    cfg = BrokerConfig(
        {
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
            "inter.broker.listener.name": "SASL_PLAINTEXT",
            "listener.name.sasl_plaintext.gssapi.sasl.jaas.config": (
                "com.sun.security.auth.module.Krb5LoginModule required;"
            ),
        }
    )  # sasl.enabled.mechanisms defaults to GSSAPI, as in Kafka
    with pytest.raises(ConfigError, match="GSSAPI of listener SASL_PLAINTEXT is not supported"):
        listener_security(cfg, listener(cfg, "SASL_PLAINTEXT"), lambda *_: None)


def tls_files(tmp_path: Path) -> tuple[CertificateAuthority, Path, Path]:
    ca = CertificateAuthority()
    return ca, ca.server().write_pem(tmp_path / "broker.pem"), ca.write_pem(tmp_path / "ca.pem")


def test_ssl_listener_principal_follows_the_mapping_rules(tmp_path: Path) -> None:
    ca, keystore, truststore = tls_files(tmp_path)
    cfg = BrokerConfig(
        {
            "listeners": "SSL://127.0.0.1:0",
            "inter.broker.listener.name": "SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(truststore),
            "ssl.client.auth": "required",
            "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/L,DEFAULT",
        }
    )
    security = listener_security(cfg, listener(cfg, "SSL"), lambda *_: None)
    assert security.tls is not None
    alice = ca.client("CN=Alice,O=tests")
    assert security.certificate_principal(alice.der) == KafkaPrincipal.user("alice")
    assert security.certificate_principal(None) == ANONYMOUS


def test_sasl_ssl_asks_for_certificates_only_when_its_listener_says_so(tmp_path: Path) -> None:
    import ssl

    _, keystore, truststore = tls_files(tmp_path)
    base = {
        "listeners": "SASL_SSL://127.0.0.1:0",
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(truststore),
        "ssl.client.auth": "required",
    }
    cfg = BrokerConfig(base)
    assert listener_security(cfg, listener(cfg, "SASL_SSL"), lambda *_: None).tls.verify_mode == (
        ssl.CERT_NONE
    )
    cfg = BrokerConfig(base | {"listener.name.sasl_ssl.ssl.client.auth": "required"})
    assert listener_security(cfg, listener(cfg, "SASL_SSL"), lambda *_: None).tls.verify_mode == (
        ssl.CERT_REQUIRED
    )


def test_the_broker_logs_in_to_its_peers_with_its_listeners_credentials(tmp_path: Path) -> None:
    _, _, truststore = tls_files(tmp_path)
    cfg = BrokerConfig(
        {
            "listeners": "BROKERS://127.0.0.1:0",
            "listener.security.protocol.map": "BROKERS:SASL_SSL",
            "inter.broker.listener.name": "BROKERS",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "listener.name.brokers.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(truststore),
        }
    )
    security = inter_broker_security(cfg)
    assert security.tls is not None and security.tls.check_hostname
    client = security.new_sasl_client()
    assert isinstance(client, ScramSaslClient) and client.mechanism == "SCRAM-SHA-512"


def test_a_peer_login_without_credentials_stops_the_broker() -> None:
    cfg = BrokerConfig(
        {
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
            "inter.broker.listener.name": "SASL_PLAINTEXT",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
                'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="a";'
            ),
        }
    )
    with pytest.raises(ConfigError, match="username and password"):
        inter_broker_security(cfg)


@pytest.mark.parametrize(
    ("enabled", "announced"),
    [  # what Java 17's HashMap iterates in, as Kafka announces them
        (
            ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"),
            ("PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256", "OAUTHBEARER"),
        ),
        (("SCRAM-SHA-512", "PLAIN"), ("SCRAM-SHA-512", "PLAIN")),
        (("OAUTHBEARER", "SCRAM-SHA-256"), ("SCRAM-SHA-256", "OAUTHBEARER")),
    ],
)
def test_mechanisms_are_announced_in_kafkas_order(
    enabled: tuple[str, ...], announced: tuple[str, ...]
) -> None:
    assert java_hash_map_order(enabled) == announced
