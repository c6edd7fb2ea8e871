"""Key stores and trust stores, read from Kafka's ``ssl.keystore.*`` and ``ssl.truststore.*``.

Kafka accepts three kinds: PEM (a file, or the text inline in the config), PKCS12 and JKS, and
its rules for which settings go together (Kafka's ``DefaultSslEngineFactory``) are kept here
with its messages, so that a listener Kafka refuses is refused here too. PEM and PKCS12 are
read with ``cryptography``, imported by the functions that read them, so that a broker
without TLS never loads it (about 14 MB and 30 ms of startup). JKS, Java's own format, is
not read: Java 9 and later read PKCS12 files whatever the configured type, so a PKCS12 file
given as ``JKS`` (the default type) loads, and a real JKS file gets a message saying how
keytool converts it.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kpybroker.config.core import ConfigError, Password

if TYPE_CHECKING:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
    from cryptography.hazmat.primitives.serialization import pkcs12

PEM_TYPE = "PEM"
# Store types read by content (Java's KeyStore types that read PKCS12 files since Java 9).
_FILE_TYPES = frozenset({"PKCS12", "JKS", "JCEKS"})
_JAVA_STORE_MAGICS = {b"\xfe\xed\xfe\xed": "JKS", b"\xce\xce\xce\xce": "JCEKS"}
_PEM_STORE_PASSWORD = (
    "SSL key store password cannot be specified with PEM format, only key password may be specified"
)
_PEM_TRUST_PASSWORD = "SSL trust store password cannot be specified for PEM format."


@dataclass(frozen=True, slots=True)
class KeyMaterial:
    """A private key and its certificate chain, leaf first: what a TLS endpoint presents."""

    key: PrivateKeyTypes
    chain: tuple[x509.Certificate, ...]

    def pem(self) -> bytes:
        """The key (unencrypted PKCS#8) and then the chain: what ``load_cert_chain`` reads."""
        from cryptography.hazmat.primitives import serialization

        key = self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        return key + b"".join(c.public_bytes(serialization.Encoding.PEM) for c in self.chain)


@dataclass(frozen=True, slots=True)
class KeyStoreConfig:
    """The ``ssl.keystore.*`` and ``ssl.key.password`` settings of one listener."""

    type: str = "JKS"
    location: str | None = None
    password: Password | None = None
    key_password: Password | None = None
    key: Password | None = None
    certificate_chain: Password | None = None

    @property
    def source_key(self) -> str:
        """The config that names the key material, for messages about it."""
        return "ssl.keystore.key" if self.key is not None else "ssl.keystore.location"

    def load(self) -> KeyMaterial | None:
        """The key and chain; None when no key store is configured (a client may have none)."""
        if self.key is not None:
            if self.type != PEM_TYPE:
                raise ConfigError(
                    "ssl.keystore.key",
                    "SSL private key can be specified only for PEM, "
                    f"but key store type is {self.type}.",
                )
            if self.certificate_chain is None:
                raise ConfigError(
                    "ssl.keystore.certificate.chain",
                    "SSL private key is specified, but certificate chain is not specified.",
                )
            if self.location is not None:
                raise ConfigError(
                    "ssl.keystore.location",
                    "Both SSL key store location and separate private key are specified.",
                )
            if self.password is not None:
                raise ConfigError("ssl.keystore.password", _PEM_STORE_PASSWORD + ".")
            return _pem_key_material(
                "ssl.keystore.key",
                "Invalid PEM keystore configs",
                self.key.value,
                self.certificate_chain.value,
                self.key_password,
            )
        if self.certificate_chain is not None:
            raise ConfigError(
                "ssl.keystore.certificate.chain",
                "SSL certificate chain is specified, but private key is not specified",
            )
        if self.type == PEM_TYPE and self.location is not None:
            if self.password is not None:
                raise ConfigError("ssl.keystore.password", _PEM_STORE_PASSWORD)
            context = f"Failed to load PEM SSL keystore {self.location}"
            text = _read_text("ssl.keystore.location", self.location, context)
            return _pem_key_material(
                "ssl.keystore.location", context, text, text, self.key_password
            )
        if self.location is None:
            if self.password is not None:
                raise ConfigError(
                    "ssl.keystore.password",
                    "SSL key store is not specified, but key store password is specified.",
                )
            return None
        if self.password is None:
            raise ConfigError(
                "ssl.keystore.password",
                "SSL key store is specified, but key store password is not specified.",
            )
        # A PKCS12 key entry is encrypted with the store password: keytool refuses another
        # key password for PKCS12, so ssl.key.password has nothing to open here.
        store = _load_pkcs12("ssl.keystore", self.type, self.location, self.password)
        if store.key is None or store.cert is None:
            raise _store_error(
                "ssl.keystore.location", self.type, self.location, "no private key entry in it"
            )
        chain = (store.cert.certificate, *(c.certificate for c in store.additional_certs))
        return KeyMaterial(store.key, chain)


@dataclass(frozen=True, slots=True)
class TrustStoreConfig:
    """The ``ssl.truststore.*`` settings of one listener."""

    type: str = "JKS"
    location: str | None = None
    password: Password | None = None
    certificates: Password | None = None

    def load(self) -> tuple[x509.Certificate, ...] | None:
        """The trusted certificates; None when no trust store is configured.

        A PKCS12 trust store's certificates are its trusted-certificate entries and the
        certificates of any key entry (the key's chain included, which Java would not trust:
        ``cryptography`` does not tell them apart).
        """
        if self.certificates is not None:
            if self.type != PEM_TYPE:
                raise ConfigError(
                    "ssl.truststore.certificates",
                    "SSL trust store certs can be specified only for PEM, "
                    f"but trust store type is {self.type}.",
                )
            if self.location is not None:
                raise ConfigError(
                    "ssl.truststore.location",
                    "Both SSL trust store location and separate trust certificates are specified.",
                )
            if self.password is not None:
                raise ConfigError("ssl.truststore.password", _PEM_TRUST_PASSWORD)
            return _pem_certificates(
                "ssl.truststore.certificates",
                "Invalid PEM truststore configs",
                self.certificates.value,
            )
        if self.type == PEM_TYPE and self.location is not None:
            if self.password is not None:
                raise ConfigError("ssl.truststore.password", _PEM_TRUST_PASSWORD)
            # Kafka's message says "keystore" here too.
            context = f"Failed to load PEM SSL keystore {self.location}"
            text = _read_text("ssl.truststore.location", self.location, context)
            return _pem_certificates("ssl.truststore.location", context, text)
        if self.location is None:
            if self.password is not None:
                raise ConfigError(
                    "ssl.truststore.password",
                    "SSL trust store is not specified, but trust store password is specified.",
                )
            return None
        store = _load_pkcs12("ssl.truststore", self.type, self.location, self.password)
        trusted = [c.certificate for c in store.additional_certs]
        if store.cert is not None:
            trusted.insert(0, store.cert.certificate)
        if not trusted:
            raise _store_error(
                "ssl.truststore.location", self.type, self.location, "no certificates in it"
            )
        return tuple(trusted)


# --------------------------------------------------------------------------- PEM


def _pem_pattern(label: str) -> re.Pattern[str]:
    """Kafka's ``PemParser``: lenient about the text around and inside the armour.

    ``BEGIN ... <label>`` may carry words before the label (``ENCRYPTED PRIVATE KEY``),
    ``Name: value`` header lines are skipped, and text outside entries is ignored.
    """
    label_pattern = label.replace(" ", r"\s+")
    begin_or_end = r"-+{}\s*.*{}[^-]*-+\s+"
    headers = r"(?:\s*[^\r\n]*:[^\r\n]*[\r\n]+)*"
    return re.compile(
        begin_or_end.format("BEGIN", label_pattern)
        + headers
        + r"([a-zA-Z0-9/+=\s]*)"
        + begin_or_end.format("END", label_pattern),
        re.ASCII,
    )


_CERTIFICATE_PEM = _pem_pattern("CERTIFICATE")
_PRIVATE_KEY_PEM = _pem_pattern("PRIVATE KEY")


def _pem_entries(pattern: re.Pattern[str], label: str, text: str) -> list[bytes]:
    entries = []
    for match in pattern.finditer(text + "\n"):  # the last newline may be missing
        try:
            entries.append(base64.b64decode(re.sub(r"\s", "", match.group(1)), validate=True))
        except binascii.Error as exc:
            raise ValueError(f"Invalid base64 in a {label} entry: {exc}") from exc
    if not entries:
        raise ValueError(f"No matching {label} entries in PEM file")
    return entries


def _certificates(text: str) -> tuple[x509.Certificate, ...]:
    from cryptography import x509

    return tuple(
        x509.load_der_x509_certificate(der)
        for der in _pem_entries(_CERTIFICATE_PEM, "CERTIFICATE", text)
    )


def _private_key(text: str, password: Password | None) -> PrivateKeyTypes:
    """One PKCS#8 key, encrypted exactly when ``ssl.key.password`` is given (as in Kafka)."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization

    keys = _pem_entries(_PRIVATE_KEY_PEM, "PRIVATE KEY", text)
    if len(keys) != 1:
        raise ValueError(f"Expected one private key, but found {len(keys)}")
    secret = None if password is None else password.value.encode()
    try:
        return serialization.load_der_private_key(keys[0], secret)
    except ValueError as exc:
        if secret is not None and not str(exc).startswith("Incorrect password"):
            # A wrong password decrypts to bytes whose padding checks out one time in 256;
            # those then fail to parse, which is still the password's fault, not the format's.
            raise ValueError(
                "Private key could not be loaded: Incorrect password, or the key is corrupt"
            ) from exc
        raise ValueError(f"Private key could not be loaded: {exc}") from exc
    except (TypeError, UnsupportedAlgorithm) as exc:
        raise ValueError(f"Private key could not be loaded: {exc}") from exc


def _pem_key_material(
    key: str, context: str, key_text: str, chain_text: str, password: Password | None
) -> KeyMaterial:
    try:
        return KeyMaterial(_private_key(key_text, password), _certificates(chain_text))
    except ValueError as exc:
        raise ConfigError(key, f"{context}: {exc}") from exc


def _pem_certificates(key: str, context: str, text: str) -> tuple[x509.Certificate, ...]:
    try:
        return _certificates(text)
    except ValueError as exc:
        raise ConfigError(key, f"{context}: {exc}") from exc


def _read_text(key: str, location: str, context: str) -> str:
    try:
        return Path(location).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ConfigError(key, f"{context}: {exc}") from exc


# --------------------------------------------------------------------------- PKCS12


def _load_pkcs12(
    prefix: str, store_type: str, location: str, password: Password | None
) -> pkcs12.PKCS12KeyAndCertificates:
    """A PKCS12 file given as PKCS12, JKS or JCEKS; refuses Java's own formats with advice."""
    from cryptography.hazmat.primitives.serialization import pkcs12

    key = f"{prefix}.location"
    if store_type.upper() not in _FILE_TYPES:
        raise _store_error(key, store_type, location, f"{store_type} not found")
    try:
        data = Path(location).read_bytes()
    except OSError as exc:
        raise _store_error(key, store_type, location, str(exc)) from exc
    java_format = _JAVA_STORE_MAGICS.get(data[:4])
    if java_format is not None:
        reason = (
            f"it is a {java_format} file, which kpybroker cannot read; convert it with "
            f"`keytool -importkeystore -srckeystore {location} -destkeystore {location}.p12 "
            "-deststoretype PKCS12` and set "
            f"{prefix}.location to the new file and {prefix}.type=PKCS12"
        )
        raise _store_error(key, store_type, location, reason)
    try:
        return pkcs12.load_pkcs12(data, None if password is None else password.value.encode())
    except ValueError as exc:
        raise _store_error(key, store_type, location, str(exc)) from exc


def _store_error(key: str, store_type: str, location: str, reason: str) -> ConfigError:
    return ConfigError(
        key, f"Failed to load SSL keystore {location} of type {store_type}: {reason}"
    )
