"""Key stores and trust stores as Kafka reads them: PEM (inline or a file) and PKCS12.

The messages of refused combinations are Kafka's (DefaultSslEngineFactory), word for word.
Stores written by Java's keytool are read where keytool is installed.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from kpybroker.config.core import ConfigError, Password
from kpybroker.security.key_stores import KeyStoreConfig, TrustStoreConfig
from tests.helpers.certificates import PASSWORD, CertificateAuthority, Identity, keytool

needs_keytool = pytest.mark.skipif(keytool() is None, reason="keytool (Java) is not installed")


@pytest.fixture(scope="module")
def ca() -> CertificateAuthority:
    return CertificateAuthority()


@pytest.fixture(scope="module")
def broker(ca: CertificateAuthority) -> Identity:
    return ca.server()


def pem_store(
    identity: Identity, key_secret: str | None = None, **changes: object
) -> KeyStoreConfig:
    """Inline PEM settings, the key encrypted with ``key_secret`` if given, then ``changes``."""
    return KeyStoreConfig(
        **{  # type: ignore[arg-type]
            "type": "PEM",
            "key": Password(identity.key_pem(key_secret)),
            "certificate_chain": Password(identity.chain_pem()),
            "key_password": None if key_secret is None else Password(key_secret),
            **changes,
        }
    )


def assert_loads(store: KeyStoreConfig, identity: Identity) -> None:
    material = store.load()
    assert material is not None
    assert material.chain == (identity.certificate, *identity.issuers)
    assert material.key.public_key() == identity.key.public_key()


# --------------------------------------------------------------------------- PEM key stores


def test_inline_pem_key_and_chain(broker: Identity) -> None:
    assert_loads(pem_store(broker), broker)


def test_inline_encrypted_pem_key(broker: Identity) -> None:
    assert_loads(pem_store(broker, "key-secret"), broker)


def test_pem_key_store_file_holds_key_and_chain(broker: Identity, tmp_path: Path) -> None:
    path = broker.write_pem(tmp_path / "broker.pem", "key-secret")
    store = KeyStoreConfig(type="PEM", location=str(path), key_password=Password("key-secret"))
    assert_loads(store, broker)


def test_pem_text_around_and_inside_entries_is_ignored(broker: Identity) -> None:
    # As openssl pkcs12 writes them: "Bag Attributes" lines before each entry.
    key = "Bag Attributes\n    friendlyName: kafka\n" + broker.key_pem().rstrip("\n")
    chain = "subject=CN = localhost\n" + broker.chain_pem() + "trailing words"
    assert_loads(pem_store(broker, key=Password(key), certificate_chain=Password(chain)), broker)


def test_the_key_material_is_what_openssl_loads(broker: Identity, tmp_path: Path) -> None:
    material = pem_store(broker, "key-secret").load()
    assert material is not None
    path = tmp_path / "plain.pem"
    path.write_bytes(material.pem())
    ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(path)


@pytest.mark.parametrize(
    ("key_password", "message"),
    [
        (None, "Private key could not be loaded: Password was not given"),
        ("wrong", "Private key could not be loaded: Incorrect password"),
    ],
)
def test_an_encrypted_key_needs_its_password(
    broker: Identity, key_password: str | None, message: str
) -> None:
    store = pem_store(broker, "key-secret", key_password=key_password and Password(key_password))
    with pytest.raises(ConfigError, match=f"^Invalid PEM keystore configs: {message}") as failure:
        store.load()
    assert failure.value.key == "ssl.keystore.key"


# A throw-away key encrypted with "key-secret". "wrong-258" decrypts it to bytes whose padding
# checks out but which do not parse: what any wrong password does one time in 256.
_KEY_A_WRONG_PASSWORD_DECRYPTS = """\
-----BEGIN ENCRYPTED PRIVATE KEY-----
MIGxMBwGCiqGSIb3DQEMAQMwDgQIiF22dW2Jg2UCAk4gBIGQPsWvPp3ewnLrhfcB
RxVCKnv15NDsLZdFZwpKshPyVR4Y0shbZoGcXdHsCdw2X4P8OQj02ODXbe1ytRya
iwiYwFztG8vW8g+uBN1+g7Qmao56KL+Atfpv6m0vhDtZB2y0xANpctuPDi+pe3Qg
iRzo/hszmAwNviM+8u7MhlYDFyOK3537Slh4UisZA80OEScD
-----END ENCRYPTED PRIVATE KEY-----
"""


def test_a_wrong_password_is_named_even_when_its_padding_checks_out(broker: Identity) -> None:
    store = pem_store(
        broker,
        key=Password(_KEY_A_WRONG_PASSWORD_DECRYPTS),
        key_password=Password("wrong-258"),
    )
    with pytest.raises(
        ConfigError,
        match=r"^Invalid PEM keystore configs: Private key could not be loaded: Incorrect password",
    ):
        store.load()


def test_a_key_password_for_an_unencrypted_key_is_refused_as_in_kafka(broker: Identity) -> None:
    with pytest.raises(ConfigError, match="Private key could not be loaded"):
        pem_store(broker, key_password=Password("key-secret")).load()


@pytest.mark.parametrize(
    ("key", "chain", "message"),
    [
        ("", "chain", "No matching PRIVATE KEY entries in PEM file"),
        ("key key", "chain", "Expected one private key, but found 2"),
        ("key", "", "No matching CERTIFICATE entries in PEM file"),
    ],
)
def test_pem_entries_that_are_missing_or_too_many(
    broker: Identity, key: str, chain: str, message: str
) -> None:
    texts = {"key": broker.key_pem(), "chain": broker.chain_pem(), "": "nothing here"}
    key_text = "".join(texts[part] for part in key.split(" "))
    store = pem_store(broker, key=Password(key_text), certificate_chain=Password(texts[chain]))
    with pytest.raises(ConfigError, match=f"^Invalid PEM keystore configs: {message}$"):
        store.load()


def test_a_missing_pem_file(tmp_path: Path) -> None:
    store = KeyStoreConfig(type="PEM", location=str(tmp_path / "absent.pem"))
    with pytest.raises(ConfigError, match=r"^Failed to load PEM SSL keystore .*absent\.pem: "):
        store.load()


@pytest.mark.parametrize(
    ("changes", "key", "message"),
    [
        (
            {"type": "PKCS12"},
            "ssl.keystore.key",
            "SSL private key can be specified only for PEM, but key store type is PKCS12.",
        ),
        (
            {"certificate_chain": None},
            "ssl.keystore.certificate.chain",
            "SSL private key is specified, but certificate chain is not specified.",
        ),
        (
            {"location": "/some/file"},
            "ssl.keystore.location",
            "Both SSL key store location and separate private key are specified.",
        ),
        (
            {"password": Password("x")},
            "ssl.keystore.password",
            "SSL key store password cannot be specified with PEM format, "
            "only key password may be specified.",
        ),
        (
            {"key": None},
            "ssl.keystore.certificate.chain",
            "SSL certificate chain is specified, but private key is not specified",
        ),
        (
            {"key": None, "certificate_chain": None, "location": "f", "password": Password("x")},
            "ssl.keystore.password",
            "SSL key store password cannot be specified with PEM format, "
            "only key password may be specified",
        ),
        (
            {"key": None, "certificate_chain": None, "type": "PKCS12", "password": Password("x")},
            "ssl.keystore.password",
            "SSL key store is not specified, but key store password is specified.",
        ),
        (
            {"key": None, "certificate_chain": None, "type": "PKCS12", "location": "f"},
            "ssl.keystore.password",
            "SSL key store is specified, but key store password is not specified.",
        ),
    ],
)
def test_key_store_settings_kafka_refuses(
    broker: Identity, changes: dict[str, object], key: str, message: str
) -> None:
    with pytest.raises(ConfigError) as failure:
        pem_store(broker, **changes).load()
    assert (failure.value.key, failure.value.message) == (key, message)


def test_no_key_store_is_none() -> None:
    assert KeyStoreConfig().load() is None


# --------------------------------------------------------------------------- PKCS12 key stores


@pytest.mark.parametrize("store_type", ["PKCS12", "pkcs12", "JKS"])
def test_pkcs12_key_store(broker: Identity, tmp_path: Path, store_type: str) -> None:
    # Since Java 9 a JKS-typed store reads PKCS12 files too, and JKS is Kafka's default type.
    path = broker.write_pkcs12(tmp_path / "broker.p12")
    store = KeyStoreConfig(type=store_type, location=str(path), password=Password(PASSWORD))
    assert_loads(store, broker)


@needs_keytool
def test_keytool_pkcs12_key_store(broker: Identity, tmp_path: Path) -> None:
    path = broker.write_keytool_store(tmp_path / "broker.p12")
    store = KeyStoreConfig(type="PKCS12", location=str(path), password=Password(PASSWORD))
    assert_loads(store, broker)


@needs_keytool
def test_a_jks_file_is_refused_with_the_conversion_to_make(
    broker: Identity, tmp_path: Path
) -> None:
    path = broker.write_keytool_store(tmp_path / "broker.jks", store_type="JKS")
    store = KeyStoreConfig(location=str(path), password=Password(PASSWORD))
    with pytest.raises(ConfigError) as failure:
        store.load()
    assert failure.value.key == "ssl.keystore.location"
    assert failure.value.message == (
        f"Failed to load SSL keystore {path} of type JKS: it is a JKS file, which kpybroker "
        f"cannot read; convert it with `keytool -importkeystore -srckeystore {path} "
        f"-destkeystore {path}.p12 -deststoretype PKCS12` and set ssl.keystore.location to "
        "the new file and ssl.keystore.type=PKCS12"
    )


@pytest.mark.parametrize(
    ("store_type", "password", "reason"),
    [
        ("PKCS12", "wrong", "Invalid password or PKCS12 data"),
        ("BKS", PASSWORD, "BKS not found"),
    ],
)
def test_pkcs12_key_store_failures(
    broker: Identity, tmp_path: Path, store_type: str, password: str, reason: str
) -> None:
    path = broker.write_pkcs12(tmp_path / "broker.p12")
    store = KeyStoreConfig(type=store_type, location=str(path), password=Password(password))
    with pytest.raises(ConfigError) as failure:
        store.load()
    assert failure.value.message == (
        f"Failed to load SSL keystore {path} of type {store_type}: {reason}"
    )


def test_a_pkcs12_file_without_a_key_is_no_key_store(
    ca: CertificateAuthority, tmp_path: Path
) -> None:
    path = ca.write_truststore(tmp_path / "trust.p12")
    store = KeyStoreConfig(type="PKCS12", location=str(path), password=Password(PASSWORD))
    with pytest.raises(ConfigError, match=r"no private key entry in it$"):
        store.load()


def test_a_missing_pkcs12_file(tmp_path: Path) -> None:
    store = KeyStoreConfig(location=str(tmp_path / "absent.p12"), password=Password(PASSWORD))
    with pytest.raises(ConfigError, match="No such file or directory"):
        store.load()


# --------------------------------------------------------------------------- trust stores


def test_inline_pem_trust_store(ca: CertificateAuthority) -> None:
    store = TrustStoreConfig(type="PEM", certificates=Password(ca.pem()))
    assert store.load() == (ca.certificate,)


def test_pem_trust_store_file(ca: CertificateAuthority, tmp_path: Path) -> None:
    store = TrustStoreConfig(type="PEM", location=str(ca.write_pem(tmp_path / "ca.pem")))
    assert store.load() == (ca.certificate,)


def test_pkcs12_trust_store(ca: CertificateAuthority, tmp_path: Path) -> None:
    path = ca.write_truststore(tmp_path / "trust.p12")
    store = TrustStoreConfig(type="PKCS12", location=str(path), password=Password(PASSWORD))
    assert store.load() == (ca.certificate,)


@needs_keytool
def test_keytool_trust_store(ca: CertificateAuthority, tmp_path: Path) -> None:
    path = ca.write_keytool_truststore(tmp_path / "trust.p12")
    store = TrustStoreConfig(location=str(path), password=Password(PASSWORD))
    assert store.load() == (ca.certificate,)


@needs_keytool
def test_keytool_trust_store_without_its_password(ca: CertificateAuthority, tmp_path: Path) -> None:
    # Java then sees no certificate at all, and every handshake fails; refused here at once.
    path = ca.write_keytool_truststore(tmp_path / "trust.p12")
    with pytest.raises(ConfigError, match="Invalid password or PKCS12 data") as failure:
        TrustStoreConfig(location=str(path)).load()
    assert failure.value.key == "ssl.truststore.location"


def test_a_key_store_as_trust_store_trusts_its_certificates(
    broker: Identity, tmp_path: Path
) -> None:
    path = broker.write_pkcs12(tmp_path / "broker.p12")
    store = TrustStoreConfig(type="PKCS12", location=str(path), password=Password(PASSWORD))
    assert store.load() == (broker.certificate, *broker.issuers)


def test_pem_trust_store_without_certificates() -> None:
    store = TrustStoreConfig(type="PEM", certificates=Password("no certificates"))
    with pytest.raises(ConfigError) as failure:
        store.load()
    assert failure.value.message == (
        "Invalid PEM truststore configs: No matching CERTIFICATE entries in PEM file"
    )


@pytest.mark.parametrize(
    ("changes", "key", "message"),
    [
        (
            {"type": "JKS"},
            "ssl.truststore.certificates",
            "SSL trust store certs can be specified only for PEM, but trust store type is JKS.",
        ),
        (
            {"location": "f"},
            "ssl.truststore.location",
            "Both SSL trust store location and separate trust certificates are specified.",
        ),
        (
            {"password": Password("x")},
            "ssl.truststore.password",
            "SSL trust store password cannot be specified for PEM format.",
        ),
        (
            {"certificates": None, "location": "f", "password": Password("x")},
            "ssl.truststore.password",
            "SSL trust store password cannot be specified for PEM format.",
        ),
        (
            {"certificates": None, "type": "PKCS12", "password": Password("x")},
            "ssl.truststore.password",
            "SSL trust store is not specified, but trust store password is specified.",
        ),
    ],
)
def test_trust_store_settings_kafka_refuses(
    ca: CertificateAuthority, changes: dict[str, object], key: str, message: str
) -> None:
    settings = {"type": "PEM", "certificates": Password(ca.pem()), **changes}
    with pytest.raises(ConfigError) as failure:
        TrustStoreConfig(**settings).load()  # type: ignore[arg-type]
    assert (failure.value.key, failure.value.message) == (key, message)


def test_no_trust_store_is_none() -> None:
    assert TrustStoreConfig().load() is None
