"""SSL contexts from Kafka's ssl.* settings: real handshakes between them, in memory.

Each test runs a TLS handshake between a ``server_context`` and a ``client_context`` over a
pair of ``ssl.MemoryBIO``s, then passes a few bytes each way, so what is checked is what a
peer sees: versions, suites, client authentication, trust and host names.
"""

from __future__ import annotations

import os
import ssl
from pathlib import Path

import pytest

from kpybroker.config.broker_config import BrokerConfig
from kpybroker.config.core import ConfigError, Password
from kpybroker.security import ssl_context
from kpybroker.security.key_stores import KeyStoreConfig, TrustStoreConfig
from kpybroker.security.ssl_context import SslSettings, client_context, server_context
from kpybroker.security.ssl_principal import SslPrincipalMapper, principal_name
from tests.helpers.certificates import CertificateAuthority, Identity, certificates_pem

# Java 17's supported TLS 1.2 suites and their IANA code points.
JAVA_TLS12_SUITES = {
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": 0xC02C,
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": 0xC02B,
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": 0xCCA9,
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": 0xC030,
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": 0xCCA8,
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": 0xC02F,
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": 0x009F,
    "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256": 0xCCAA,
    "TLS_DHE_DSS_WITH_AES_256_GCM_SHA384": 0x00A3,
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": 0x009E,
    "TLS_DHE_DSS_WITH_AES_128_GCM_SHA256": 0x00A2,
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384": 0xC024,
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384": 0xC028,
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": 0xC023,
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": 0xC027,
    "TLS_DHE_RSA_WITH_AES_256_CBC_SHA256": 0x006B,
    "TLS_DHE_DSS_WITH_AES_256_CBC_SHA256": 0x006A,
    "TLS_DHE_RSA_WITH_AES_128_CBC_SHA256": 0x0067,
    "TLS_DHE_DSS_WITH_AES_128_CBC_SHA256": 0x0040,
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": 0xC00A,
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": 0xC014,
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": 0xC009,
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": 0xC013,
    "TLS_DHE_RSA_WITH_AES_256_CBC_SHA": 0x0039,
    "TLS_DHE_DSS_WITH_AES_256_CBC_SHA": 0x0038,
    "TLS_DHE_RSA_WITH_AES_128_CBC_SHA": 0x0033,
    "TLS_DHE_DSS_WITH_AES_128_CBC_SHA": 0x0032,
    "TLS_RSA_WITH_AES_256_GCM_SHA384": 0x009D,
    "TLS_RSA_WITH_AES_128_GCM_SHA256": 0x009C,
    "TLS_RSA_WITH_AES_256_CBC_SHA256": 0x003D,
    "TLS_RSA_WITH_AES_128_CBC_SHA256": 0x003C,
    "TLS_RSA_WITH_AES_256_CBC_SHA": 0x0035,
    "TLS_RSA_WITH_AES_128_CBC_SHA": 0x002F,
}


@pytest.fixture(scope="module")
def ca() -> CertificateAuthority:
    return CertificateAuthority()


@pytest.fixture(scope="module")
def broker(ca: CertificateAuthority) -> Identity:
    return ca.server()


@pytest.fixture(scope="module")
def alice(ca: CertificateAuthority) -> Identity:
    return ca.client("CN=alice,OU=eng,O=Example\\, Inc.")


def key_store(identity: Identity) -> KeyStoreConfig:
    return KeyStoreConfig(
        type="PEM",
        key=Password(identity.key_pem()),
        certificate_chain=Password(identity.chain_pem()),
    )


def trust_store(ca: CertificateAuthority) -> TrustStoreConfig:
    return TrustStoreConfig(type="PEM", certificates=Password(ca.pem()))


def settings(
    identity: Identity | None, ca: CertificateAuthority | None, **changes: object
) -> SslSettings:
    return SslSettings(
        key_store=key_store(identity) if identity else KeyStoreConfig(),
        trust_store=trust_store(ca) if ca else TrustStoreConfig(),
        **changes,  # type: ignore[arg-type]
    )


class Handshake:
    """A client and a server ``SSLObject`` joined by memory buffers."""

    def __init__(
        self,
        server: ssl.SSLContext,
        client: ssl.SSLContext,
        server_hostname: str = "localhost",
    ) -> None:
        self.server_in, self.server_out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.client_in, self.client_out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.server = server.wrap_bio(self.server_in, self.server_out, server_side=True)
        self.client = client.wrap_bio(
            self.client_in, self.client_out, server_hostname=server_hostname
        )

    def _pump(self) -> None:
        self.server_in.write(self.client_out.read())
        self.client_in.write(self.server_out.read())

    def run(self) -> None:
        """Step both sides until both are done; the first error raised is the test's."""
        done = {self.client: False, self.server: False}
        for _ in range(10):
            for side in (self.client, self.server):
                if not done[side]:
                    try:
                        side.do_handshake()
                        done[side] = True
                    except ssl.SSLWantReadError:
                        pass
                self._pump()
            if all(done.values()):
                break
        assert all(done.values()), "handshake did not finish"
        # Application data both ways: in TLS 1.3 the server judges the client's certificate
        # after the client thinks the handshake is over, so this is where a refusal shows.
        self.client.write(b"ping")
        self._pump()
        assert self.server.read(4) == b"ping"
        self.server.write(b"pong")
        self._pump()
        assert self.client.read(4) == b"pong"


def connect(
    server_settings: SslSettings, client_settings: SslSettings, server_hostname: str = "localhost"
) -> Handshake:
    handshake = Handshake(
        server_context(server_settings), client_context(client_settings), server_hostname
    )
    handshake.run()
    return handshake


# --------------------------------------------------------------------------- settings


def test_settings_read_the_broker_configs_of_the_listener(broker: Identity) -> None:
    config = BrokerConfig(
        {
            "listeners": "PLAINTEXT://:9092,SSL://:9093",
            "ssl.keystore.type": "PEM",
            "listener.name.ssl.ssl.keystore.key": "key text",
            "listener.name.ssl.ssl.keystore.certificate.chain": "chain text",
            "ssl.client.auth": "required",
            "ssl.cipher.suites": "TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384",
            "ssl.principal.mapping.rules": "RULE:^CN=(.*?),.*$/$1/,DEFAULT",
        }
    )
    read = SslSettings.from_config(config.listener_getter("ssl"))
    assert read == SslSettings(
        client_auth="required",
        cipher_suites=("TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384"),
        key_store=KeyStoreConfig(
            type="PEM", key=Password("key text"), certificate_chain=Password("chain text")
        ),
        principal_mapping_rules="RULE:^CN=(.*?),.*$/$1/,DEFAULT",
    )


def test_broker_defaults_are_the_settings_defaults() -> None:
    assert SslSettings.from_config(BrokerConfig().get) == SslSettings()


def test_a_value_of_the_wrong_type_is_a_programming_error() -> None:
    with pytest.raises(TypeError, match=r"ssl\.keystore\.password should be a Password"):
        SslSettings.from_config({"ssl.keystore.password": "plain"}.get)


# --------------------------------------------------------------------------- client authentication


def test_client_auth_none_verifies_the_server_only(
    ca: CertificateAuthority, broker: Identity, alice: Identity
) -> None:
    handshake = connect(settings(broker, None), settings(alice, ca))
    assert handshake.server.getpeercert(binary_form=True) is None
    assert handshake.client.getpeercert()["subject"] == ((("commonName", "localhost"),),)


@pytest.mark.parametrize("client_auth", ["requested", "required", "REQUIRED"])
def test_a_client_certificate_names_the_principal(
    ca: CertificateAuthority, broker: Identity, alice: Identity, client_auth: str
) -> None:
    handshake = connect(settings(broker, ca, client_auth=client_auth), settings(alice, ca))
    der = handshake.server.getpeercert(binary_form=True)
    assert principal_name(der, SslPrincipalMapper()) == "CN=alice,OU=eng,O=Example\\, Inc."
    mapper = SslPrincipalMapper("RULE:^CN=(.*?),OU=(.*?),.*$/$1@$2/U")
    assert principal_name(der, mapper) == "ALICE@ENG"


def test_requested_client_auth_lets_a_client_without_certificate_in_as_anonymous(
    ca: CertificateAuthority, broker: Identity
) -> None:
    handshake = connect(settings(broker, ca, client_auth="requested"), settings(None, ca))
    der = handshake.server.getpeercert(binary_form=True)
    assert der is None
    assert principal_name(der, SslPrincipalMapper()) == "ANONYMOUS"


def test_required_client_auth_refuses_a_client_without_certificate(
    ca: CertificateAuthority, broker: Identity
) -> None:
    with pytest.raises(ssl.SSLError, match="PEER_DID_NOT_RETURN_A_CERTIFICATE"):
        connect(settings(broker, ca, client_auth="required"), settings(None, ca))


@pytest.mark.parametrize("client_auth", ["requested", "required"])
def test_a_client_certificate_from_an_unknown_ca_is_refused(
    ca: CertificateAuthority, broker: Identity, client_auth: str
) -> None:
    stranger = CertificateAuthority("CN=other CA").client("CN=mallory")
    with pytest.raises(ssl.SSLCertVerificationError):
        connect(settings(broker, ca, client_auth=client_auth), settings(stranger, ca))


def test_without_trust_store_client_certificates_are_checked_against_system_cas(
    ca: CertificateAuthority, broker: Identity, alice: Identity
) -> None:
    # Kafka then uses the JDK's cacerts; a private CA is in neither.
    context = server_context(settings(broker, None, client_auth="required"))
    assert context.verify_mode == ssl.CERT_REQUIRED
    with pytest.raises(ssl.SSLCertVerificationError):
        Handshake(context, client_context(settings(alice, ca))).run()


def test_a_leaf_certificate_in_the_trust_store_is_a_trust_anchor(broker: Identity) -> None:
    # Java's PKIX trusts any certificate of the trust store, not only self-signed roots.
    leaf = TrustStoreConfig(
        type="PEM", certificates=Password(certificates_pem([broker.certificate]))
    )
    connect(settings(broker, None), SslSettings(trust_store=leaf))


# --------------------------------------------------------------------------- server trust


def test_a_client_refuses_a_server_its_trust_store_does_not_vouch_for(broker: Identity) -> None:
    other = CertificateAuthority("CN=other CA")
    with pytest.raises(ssl.SSLCertVerificationError, match="certificate verify failed"):
        connect(settings(broker, None), settings(None, other))


def test_a_client_without_trust_store_uses_the_system_cas(broker: Identity) -> None:
    with pytest.raises(ssl.SSLCertVerificationError):
        connect(settings(broker, None), settings(None, None))


def test_https_endpoint_identification_checks_the_host_name(
    ca: CertificateAuthority, broker: Identity
) -> None:
    connect(settings(broker, None), settings(None, ca), server_hostname="127.0.0.1")
    with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
        connect(settings(broker, None), settings(None, ca), server_hostname="broker.example")


def test_empty_endpoint_identification_skips_the_host_name_but_not_the_chain(
    ca: CertificateAuthority, broker: Identity
) -> None:
    unchecked = settings(None, ca, endpoint_identification_algorithm="")
    connect(settings(broker, None), unchecked, server_hostname="broker.example")
    stranger = CertificateAuthority("CN=other CA").server()
    with pytest.raises(ssl.SSLCertVerificationError):
        connect(settings(stranger, None), unchecked, server_hostname="broker.example")


def test_an_unknown_endpoint_identification_algorithm_is_refused() -> None:
    with pytest.raises(ConfigError, match="Unknown identification algorithm: DNS"):
        client_context(SslSettings(endpoint_identification_algorithm="DNS"))


# --------------------------------------------------------------------------- protocols


def test_default_settings_negotiate_tls13(ca: CertificateAuthority, broker: Identity) -> None:
    handshake = connect(settings(broker, None), settings(None, ca))
    assert handshake.client.version() == "TLSv1.3"


def test_enabled_protocols_limit_the_versions(ca: CertificateAuthority, broker: Identity) -> None:
    tls12_server = settings(broker, None, enabled_protocols=("TLSv1.2",))
    assert connect(tls12_server, settings(None, ca)).server.version() == "TLSv1.2"
    tls13_client = settings(None, ca, enabled_protocols=("TLSv1.3",))
    with pytest.raises(ssl.SSLError, match=r"UNSUPPORTED_PROTOCOL|PROTOCOL_VERSION"):
        connect(tls12_server, tls13_client)


def test_older_protocol_names_are_accepted_and_never_used(
    ca: CertificateAuthority, broker: Identity
) -> None:
    server = settings(broker, None, enabled_protocols=("TLSv1", "TLSv1.1", "TLSv1.2"))
    context = server_context(server)
    assert context.minimum_version == context.maximum_version == ssl.TLSVersion.TLSv1_2
    assert connect(server, settings(None, ca)).client.version() == "TLSv1.2"


def test_a_client_of_a_tls12_ssl_protocol_never_offers_tls13(
    ca: CertificateAuthority, broker: Identity
) -> None:
    # As Java's SSLContext.getInstance("TLSv1.2"), whatever ssl.enabled.protocols says.
    client = settings(None, ca, protocol="TLSv1.2")
    assert client_context(client).maximum_version == ssl.TLSVersion.TLSv1_2
    tls13_server = settings(broker, None, enabled_protocols=("TLSv1.3",))
    with pytest.raises(ssl.SSLError):
        connect(tls13_server, client)
    # A server's ssl.protocol limits nothing.
    server = settings(broker, None, protocol="TLSv1.2")
    assert connect(server, settings(None, ca)).server.version() == "TLSv1.3"


@pytest.mark.parametrize(
    ("changes", "key", "message"),
    [
        ({"enabled_protocols": ("TLSv1.4",)}, "ssl.enabled.protocols", "Unsupported protocol"),
        ({"enabled_protocols": ("tlsv1.2",)}, "ssl.enabled.protocols", "Unsupported protocol"),
        ({"enabled_protocols": ("TLSv1.1",)}, "ssl.enabled.protocols", "none of them"),
        ({"protocol": "TLSv1.4"}, "ssl.protocol", "TLSv1.4 SSLContext not available"),
        ({"protocol": "TLSv1.1"}, "ssl.protocol", "older than TLSv1.2"),
        (
            {"protocol": "TLSv1.2", "enabled_protocols": ("TLSv1.3",)},
            "ssl.protocol",
            "offers none of the versions",
        ),
    ],
)
def test_protocols_openssl_cannot_speak_are_refused(
    changes: dict[str, object], key: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as failure:
        client_context(SslSettings(**changes))  # type: ignore[arg-type]
    assert failure.value.key == key


def test_ssl_protocol_is_case_insensitive_as_in_java() -> None:
    assert client_context(SslSettings(protocol="tls")).maximum_version == ssl.TLSVersion.TLSv1_3


# --------------------------------------------------------------------------- cipher suites


def test_java_suite_names_map_to_the_same_openssl_suites() -> None:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.set_ciphers("ALL:@SECLEVEL=0")
    codes = {c["name"]: c["id"] & 0xFFFF for c in context.get_ciphers()}
    for java_name, iana_code in JAVA_TLS12_SUITES.items():
        openssl_name = ssl_context._openssl_suite(java_name, ())
        assert codes.get(openssl_name) == iana_code, java_name


def test_tls12_suites_only_turn_tls13_off(ca: CertificateAuthority, broker: Identity) -> None:
    suite = ("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",)
    handshake = connect(settings(broker, None, cipher_suites=suite), settings(None, ca))
    assert handshake.client.version() == "TLSv1.2"
    assert handshake.client.cipher()[0] == "ECDHE-ECDSA-AES128-GCM-SHA256"


def test_tls13_suites_only_turn_tls12_off(ca: CertificateAuthority, broker: Identity) -> None:
    suites = ("TLS_AES_256_GCM_SHA384", "TLS_EMPTY_RENEGOTIATION_INFO_SCSV")
    context = server_context(settings(broker, None, cipher_suites=suites))
    assert context.minimum_version == ssl.TLSVersion.TLSv1_3
    tls12_client = settings(None, ca, enabled_protocols=("TLSv1.2",))
    with pytest.raises(ssl.SSLError):
        connect(settings(broker, None, cipher_suites=suites), tls12_client)


def test_suites_of_both_versions_keep_both(ca: CertificateAuthority, broker: Identity) -> None:
    suites = ("TLS_AES_128_GCM_SHA256", "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384")
    server = settings(broker, None, cipher_suites=suites)
    tls12_client = settings(None, ca, enabled_protocols=("TLSv1.2",))
    assert connect(server, tls12_client).client.cipher()[0] == "ECDHE-ECDSA-AES256-GCM-SHA384"
    assert connect(server, settings(None, ca)).client.version() == "TLSv1.3"


def test_a_suite_the_other_side_lacks_fails_the_handshake(
    ca: CertificateAuthority, broker: Identity
) -> None:
    server = settings(broker, None, cipher_suites=("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",))
    client = settings(None, ca, cipher_suites=("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",))
    with pytest.raises(ssl.SSLError, match=r"NO_SHARED_CIPHER|HANDSHAKE_FAILURE"):
        connect(server, client)


@pytest.mark.parametrize(
    ("suites", "message"),
    [
        (("TLS_FOO",), "Unsupported CipherSuite: TLS_FOO"),
        (("ECDHE-RSA-AES128-GCM-SHA256",), "Unsupported CipherSuite: ECDHE-RSA-AES128-GCM"),
        (("TLS_RSA_WITH_3DES_EDE_CBC_SHA",), "Unsupported CipherSuite"),
        (("TLS_EMPTY_RENEGOTIATION_INFO_SCSV",), "none of these suites is usable"),
    ],
)
def test_unknown_suites_are_refused(suites: tuple[str, ...], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as failure:
        client_context(SslSettings(cipher_suites=suites))
    assert failure.value.key == "ssl.cipher.suites"


def test_a_partial_tls13_list_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    client_context(SslSettings(cipher_suites=("TLS_AES_128_GCM_SHA256",)))
    assert "cannot restrict TLS 1.3 cipher suites" in caplog.text


# --------------------------------------------------------------------------- the contexts


def test_a_listener_needs_a_key_store() -> None:
    with pytest.raises(ConfigError, match="needs a key store") as failure:
        server_context(SslSettings())
    assert failure.value.key == "ssl.keystore.location"


def test_server_context_options(broker: Identity) -> None:
    context = server_context(settings(broker, None))
    assert context.options & ssl.OP_NO_RENEGOTIATION
    assert context.options & ssl.OP_NO_COMPRESSION
    assert context.options & ssl.OP_CIPHER_SERVER_PREFERENCE
    assert context.num_tickets == 1
    assert context.verify_mode == ssl.CERT_NONE


def test_a_key_not_matching_its_certificate_is_refused(
    ca: CertificateAuthority, broker: Identity, alice: Identity
) -> None:
    mismatched = KeyStoreConfig(
        type="PEM",
        key=Password(alice.key_pem()),
        certificate_chain=Password(broker.chain_pem()),
    )
    with pytest.raises(ConfigError, match="cannot be used") as failure:
        server_context(SslSettings(key_store=mismatched))
    assert failure.value.key == "ssl.keystore.key"


def test_rsa_keys_and_pkcs12_stores_work(ca: CertificateAuthority, tmp_path: Path) -> None:
    rsa_broker = ca.issue("CN=localhost", dns_names=["localhost"], key_type="rsa")
    store = KeyStoreConfig(
        type="PKCS12",
        location=str(rsa_broker.write_pkcs12(tmp_path / "broker.p12")),
        password=Password("test-password"),
    )
    trust = TrustStoreConfig(
        type="PKCS12",
        location=str(ca.write_truststore(tmp_path / "trust.p12")),
        password=Password("test-password"),
    )
    handshake = connect(SslSettings(key_store=store), SslSettings(trust_store=trust))
    assert handshake.client.getpeercert()["subject"] == ((("commonName", "localhost"),),)


def test_key_material_reaches_openssl_through_memory_or_a_private_temp_file(
    broker: Identity, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: list[str] = []
    original = ssl.SSLContext.load_cert_chain

    def spy(self: ssl.SSLContext, certfile: str) -> None:
        seen.append(certfile)
        if not certfile.startswith("/proc/"):
            assert os.stat(certfile).st_mode & 0o777 == 0o600
            assert os.stat(os.path.dirname(certfile)).st_mode & 0o777 == 0o700
        original(self, certfile)

    monkeypatch.setattr(ssl.SSLContext, "load_cert_chain", spy)
    server_context(settings(broker, None))
    if hasattr(os, "memfd_create"):
        assert seen[-1].startswith("/proc/self/fd/")
    monkeypatch.setattr(ssl_context, "_memory_file", lambda: None)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    server_context(settings(broker, None))
    assert Path(seen[-1]).is_relative_to(tmp_path)
    assert list(tmp_path.iterdir()) == []
