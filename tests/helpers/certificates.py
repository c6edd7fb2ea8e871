"""Certificates for TLS tests: a CA issuing server and client certificates, and their files.

The files are the ones Kafka's clients and kpybroker read: PEM certificates and PKCS#8 keys
(librdkafka, Python and Java's PEM support), encrypted keys in the one scheme every one of them
decrypts, PKCS#12 key stores and trust stores (Java), and, where Java's ``keytool`` is installed,
stores written by keytool itself, so that a test meets the files a Kafka user really has.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import shutil
import subprocess
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID

KeyType = Literal["ec", "rsa"]
PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey

PASSWORD = "test-password"
_VALIDITY = datetime.timedelta(days=2)
_ALIAS = "kafka"


def new_key(key_type: KeyType = "ec") -> PrivateKey:
    """A fresh key: P-256 by default (fast to make), RSA 2048 on request."""
    if key_type == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return ec.generate_private_key(ec.SECP256R1())


def keytool() -> str | None:
    """Java's keytool, or None where Java is not installed."""
    return shutil.which("keytool")


@dataclass(frozen=True)
class Identity:
    """A private key and its certificate, with the issuing CAs' certificates (nearest first)."""

    key: PrivateKey
    certificate: x509.Certificate
    issuers: tuple[x509.Certificate, ...]

    @property
    def der(self) -> bytes:
        """The certificate, DER: what ``getpeercert(binary_form=True)`` gives the peer."""
        return self.certificate.public_bytes(serialization.Encoding.DER)

    def chain_pem(self) -> str:
        """The certificate then its issuers, PEM (``ssl.keystore.certificate.chain``)."""
        return certificates_pem((self.certificate, *self.issuers))

    def key_pem(self, password: str | None = None) -> str:
        """The key as PKCS#8 PEM (``ssl.keystore.key``); encrypted when a password is given.

        Encrypted keys use PBE-SHA1-3DES: Kafka's PEM loader on Java 17 cannot decrypt the
        PBES2 scheme that ``cryptography`` (and OpenSSL) choose by default.
        """
        if password is None:
            return self.key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            ).decode()
        return _pem("ENCRYPTED PRIVATE KEY", _pbes1_encrypted_pkcs8(self.key, password))

    def pkcs12(self, password: str = PASSWORD) -> bytes:
        """A PKCS#12 key store: one key entry, with the chain (``ssl.keystore.type=PKCS12``)."""
        return pkcs12.serialize_key_and_certificates(
            _ALIAS.encode(),
            self.key,
            self.certificate,
            list(self.issuers),
            serialization.BestAvailableEncryption(password.encode()),
        )

    def write_pem(self, path: Path, password: str | None = None) -> Path:
        """Key and chain in one PEM file (``ssl.keystore.type=PEM`` with a location)."""
        path.write_text(self.key_pem(password) + self.chain_pem())
        return path

    def write_key_pem(self, path: Path, password: str | None = None) -> Path:
        """The key alone (librdkafka's ``ssl.key.location``)."""
        path.write_text(self.key_pem(password))
        return path

    def write_chain_pem(self, path: Path) -> Path:
        """The chain alone (librdkafka's ``ssl.certificate.location``)."""
        path.write_text(self.chain_pem())
        return path

    def write_pkcs12(self, path: Path, password: str = PASSWORD) -> Path:
        path.write_bytes(self.pkcs12(password))
        return path

    def write_keytool_store(
        self, path: Path, password: str = PASSWORD, store_type: str = "PKCS12"
    ) -> Path:
        """The key store as keytool writes it (PKCS12, or JKS to test its refusal).

        keytool cannot import a PEM key, so it copies the entry out of a PKCS#12 file, as a
        Kafka user converting a store would. Needs ``keytool()``.
        """
        source = path.with_name(path.name + ".source.p12")
        self.write_pkcs12(source, password)
        _run_keytool(
            "-importkeystore",
            "-srckeystore", str(source), "-srcstoretype", "PKCS12", "-srcstorepass", password,
            "-destkeystore", str(path), "-deststoretype", store_type,
            "-deststorepass", password, "-destkeypass", password,
        )  # fmt: skip
        source.unlink()
        return path


class CertificateAuthority:
    """A self-signed root that issues end-entity certificates for tests."""

    def __init__(self, subject: str = "CN=kpybroker test CA", key_type: KeyType = "ec") -> None:
        self.key = new_key(key_type)
        name = x509.Name.from_rfc4514_string(subject)
        self.certificate = (
            _builder(name, name, self.key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(_ca_usage(), critical=True)
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()), critical=False
            )
            .sign(self.key, hashes.SHA256())
        )

    def pem(self) -> str:
        """The CA certificate, PEM (``ssl.truststore.certificates``, librdkafka's CA file)."""
        return certificates_pem((self.certificate,))

    def issue(
        self,
        subject: str | x509.Name,
        *,
        dns_names: Iterable[str] = (),
        ip_addresses: Iterable[str] = (),
        key_type: KeyType = "ec",
        not_after: datetime.datetime | None = None,
    ) -> Identity:
        """An end-entity certificate for ``subject`` (RFC 4514 text, most specific first).

        It may serve as a TLS server and a TLS client, so one identity can be a broker that
        also connects to other brokers.
        """
        name = subject if isinstance(subject, x509.Name) else x509.Name.from_rfc4514_string(subject)
        key = new_key(key_type)
        builder = (
            _builder(name, self.certificate.subject, key.public_key(), not_after)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()),
                critical=False,
            )
        )
        alt_names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
        alt_names += [x509.IPAddress(ipaddress.ip_address(a)) for a in ip_addresses]
        if alt_names:
            builder = builder.add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        certificate = builder.sign(self.key, hashes.SHA256())
        return Identity(key, certificate, (self.certificate,))

    def server(
        self,
        subject: str = "CN=localhost",
        dns_names: Iterable[str] = ("localhost",),
        ip_addresses: Iterable[str] = ("127.0.0.1",),
    ) -> Identity:
        """A broker's certificate, valid for localhost and 127.0.0.1 by default."""
        return self.issue(subject, dns_names=dns_names, ip_addresses=ip_addresses)

    def client(self, subject: str = "CN=client") -> Identity:
        return self.issue(subject)

    def write_pem(self, path: Path) -> Path:
        path.write_text(self.pem())
        return path

    def write_truststore(self, path: Path, password: str = PASSWORD) -> Path:
        """A PKCS#12 trust store holding the CA as a trusted certificate entry (Java's kind)."""
        path.write_bytes(
            pkcs12.serialize_java_truststore(
                [pkcs12.PKCS12Certificate(self.certificate, b"ca")],
                serialization.BestAvailableEncryption(password.encode()),
            )
        )
        return path

    def write_keytool_truststore(self, path: Path, password: str = PASSWORD) -> Path:
        """The trust store as ``keytool -importcert`` writes it. Needs ``keytool()``."""
        ca_file = self.write_pem(path.with_name(path.name + ".ca.pem"))
        _run_keytool(
            "-importcert", "-noprompt", "-alias", "ca", "-file", str(ca_file),
            "-keystore", str(path), "-storetype", "PKCS12", "-storepass", password,
        )  # fmt: skip
        ca_file.unlink()
        return path


def certificates_pem(certificates: Iterable[x509.Certificate]) -> str:
    return "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certificates)


def _builder(
    subject: x509.Name,
    issuer: x509.Name,
    public_key: ec.EllipticCurvePublicKey | rsa.RSAPublicKey,
    not_after: datetime.datetime | None = None,
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(not_after or now + _VALIDITY)
    )


def _ca_usage() -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=True,
        crl_sign=True,
        encipher_only=False,
        decipher_only=False,
    )


def _pem(label: str, der: bytes) -> str:
    body = "\n".join(textwrap.wrap(base64.b64encode(der).decode(), 64))
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----\n"


def _pbes1_encrypted_pkcs8(key: PrivateKey, password: str) -> bytes:
    """An EncryptedPrivateKeyInfo under pbeWithSHAAnd3-KeyTripleDES-CBC.

    ``cryptography`` writes that scheme only inside PKCS#12, so the key bag is taken out of a
    PKCS#12 file holding nothing else: PFX > authSafe > content > AuthenticatedSafe >
    ContentInfo > content > SafeContents > SafeBag > bagValue.
    """
    encryption = (
        serialization.PrivateFormat.PKCS12.encryption_builder()
        .key_cert_algorithm(pkcs12.PBES.PBESv1SHA1And3KeyTripleDESCBC)
        .build(password.encode())
    )
    data = pkcs12.serialize_key_and_certificates(None, key, None, None, encryption)
    for index in (0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 1):
        data = _der_elements(data)[index][1]
    return _der_elements(data)[0][0]


def _der_elements(data: bytes) -> list[tuple[bytes, bytes]]:
    """(whole element, content) of each DER element in ``data``, in order."""
    elements = []
    pos = 0
    while pos < len(data):
        length, start = data[pos + 1], pos + 2
        if length & 0x80:
            size = length & 0x7F
            length, start = int.from_bytes(data[start : start + size], "big"), start + size
        elements.append((data[pos : start + length], data[start : start + length]))
        pos = start + length
    return elements


def _run_keytool(*args: str) -> None:
    tool = keytool()
    if tool is None:
        raise RuntimeError("keytool is not installed (it comes with Java)")
    subprocess.run([tool, *args], check=True, capture_output=True, timeout=120)
