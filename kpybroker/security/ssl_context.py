"""Python ``ssl.SSLContext``s built from a listener's Kafka ``ssl.*`` settings.

``server_context`` is for an SSL or SASL_SSL listener, ``client_context`` for a broker
connecting to another. Both follow what Kafka's ``DefaultSslEngineFactory`` does with the same
settings on Java 17, translated to OpenSSL:

- ``ssl.enabled.protocols`` sets the versions (TLSv1.2 and TLSv1.3; the older names Java knows
  are accepted and ignored, as Java disables them). On the client side ``ssl.protocol`` caps
  them, as Java's ``SSLContext.getInstance("TLSv1.2")`` never offers TLSv1.3; a server
  accepts every enabled version whatever ``ssl.protocol`` says, as Java's does.
- ``ssl.cipher.suites`` takes Java's (IANA) names, mapped to OpenSSL's. Python's ``ssl`` cannot
  choose among TLS 1.3 suites: listing any of them keeps TLS 1.3 with all three of OpenSSL's
  (the three Java offers too), listing none turns TLS 1.3 off, as Java would have no suite
  for it. Empty leaves OpenSSL's default TLS 1.2 list, which unlike Java's has no RSA key
  exchange and no SHA-1 suites.
- Trust: any certificate in the trust store is a trust anchor (Java's PKIX rule, OpenSSL's
  partial chains). With no trust store, the system's CA certificates stand in for the JDK's
  ``cacerts``, which Kafka then uses.
- Renegotiation is refused (Kafka's transport layer refuses it) and compression is off.
"""

from __future__ import annotations

import contextlib
import logging
import os
import ssl
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from kpybroker.config.core import ConfigError, Password
from kpybroker.security.key_stores import KeyMaterial, KeyStoreConfig, TrustStoreConfig
from kpybroker.security.ssl_principal import DEFAULT_MAPPING_RULES

if TYPE_CHECKING:
    from cryptography import x509

log = logging.getLogger(__name__)

DEFAULT_PROTOCOLS = ("TLSv1.2", "TLSv1.3")
# The versions this OpenSSL speaks, of those Java enables.
_SPOKEN = {
    name: version
    for name, version in (("TLSv1.2", ssl.TLSVersion.TLSv1_2), ("TLSv1.3", ssl.TLSVersion.TLSv1_3))
    if getattr(ssl, f"HAS_{version.name}")
}
# Names Java accepts in ssl.enabled.protocols; the older ones it never negotiates
# (jdk.tls.disabledAlgorithms).
_PROTOCOL_NAMES = frozenset(
    {"SSLv2Hello", "SSLv3", "TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3", "DTLSv1.0", "DTLSv1.2"}
)
# ssl.protocol (Java's SSLContext algorithm, any case) -> the highest version its client offers.
_CONTEXT_CEILINGS: dict[str, ssl.TLSVersion | None] = {
    "TLS": ssl.TLSVersion.TLSv1_3,
    "SSL": ssl.TLSVersion.TLSv1_3,
    "TLSV1.3": ssl.TLSVersion.TLSv1_3,
    "TLSV1.2": ssl.TLSVersion.TLSv1_2,
    "TLSV1.1": None,
    "TLSV1": None,
    "SSLV3": None,
}
_CLIENT_AUTH = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}
# Endpoint identification: Java's HTTPS and LDAP(S) checks both come down to the host name.
_HOSTNAME_ALGORITHMS = frozenset({"HTTPS", "LDAP", "LDAPS"})

# Cipher suites: Java's names are IANA's, TLS_<key exchange>_WITH_<cipher>_<hash>.
TLS13_SUITES = frozenset(
    {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}
)
_SIGNALLING_SUITES = frozenset({"TLS_EMPTY_RENEGOTIATION_INFO_SCSV"})
_KEY_EXCHANGES = {
    "RSA": "",
    "ECDHE_RSA": "ECDHE-RSA-",
    "ECDHE_ECDSA": "ECDHE-ECDSA-",
    "DHE_RSA": "DHE-RSA-",
    "DHE_DSS": "DHE-DSS-",
}
_CIPHERS = {
    "AES_128_GCM": "AES128-GCM",
    "AES_256_GCM": "AES256-GCM",
    "AES_128_CBC": "AES128",
    "AES_256_CBC": "AES256",
    "CHACHA20_POLY1305": "CHACHA20-POLY1305",
}
_HASHES = frozenset({"SHA", "SHA256", "SHA384"})


@dataclass(frozen=True, slots=True)
class SslSettings:
    """One listener's resolved ``ssl.*`` settings (defaults: the broker's)."""

    protocol: str = "TLSv1.3"
    enabled_protocols: tuple[str, ...] = DEFAULT_PROTOCOLS
    cipher_suites: tuple[str, ...] = ()
    client_auth: str = "none"
    endpoint_identification_algorithm: str | None = "https"
    key_store: KeyStoreConfig = field(default_factory=KeyStoreConfig)
    trust_store: TrustStoreConfig = field(default_factory=TrustStoreConfig)
    principal_mapping_rules: str = DEFAULT_MAPPING_RULES

    @classmethod
    def from_config(cls, get: Callable[[str], object]) -> SslSettings:
        """Read the ``ssl.*`` keys through ``get``, which returns BrokerConfig's typed values
        (with the listener's ``listener.name.<l>.`` overrides already applied)."""
        return cls(
            protocol=_typed(get, "ssl.protocol", str) or "TLSv1.3",
            enabled_protocols=_typed(get, "ssl.enabled.protocols", tuple) or (),
            cipher_suites=_typed(get, "ssl.cipher.suites", tuple) or (),
            client_auth=_typed(get, "ssl.client.auth", str) or "none",
            endpoint_identification_algorithm=_typed(
                get, "ssl.endpoint.identification.algorithm", str
            ),
            key_store=KeyStoreConfig(
                type=_typed(get, "ssl.keystore.type", str) or "JKS",
                location=_typed(get, "ssl.keystore.location", str),
                password=_typed(get, "ssl.keystore.password", Password),
                key_password=_typed(get, "ssl.key.password", Password),
                key=_typed(get, "ssl.keystore.key", Password),
                certificate_chain=_typed(get, "ssl.keystore.certificate.chain", Password),
            ),
            trust_store=TrustStoreConfig(
                type=_typed(get, "ssl.truststore.type", str) or "JKS",
                location=_typed(get, "ssl.truststore.location", str),
                password=_typed(get, "ssl.truststore.password", Password),
                certificates=_typed(get, "ssl.truststore.certificates", Password),
            ),
            principal_mapping_rules=(
                _typed(get, "ssl.principal.mapping.rules", str) or DEFAULT_MAPPING_RULES
            ),
        )


def server_context(settings: SslSettings) -> ssl.SSLContext:
    """The context of a listener: its key store, and client authentication as configured.

    Raises ``ConfigError`` for settings Kafka refuses, and for a listener without a key store
    (Kafka starts one, but no client could ever complete a handshake with it).
    """
    _check_protocol_name(settings.protocol)
    context = _new_context(True, settings, _enabled_versions(settings))
    material = settings.key_store.load()
    if material is None:
        raise ConfigError(
            "ssl.keystore.location",
            "An SSL listener needs a key store: set ssl.keystore.location "
            "(or ssl.keystore.key and ssl.keystore.certificate.chain with ssl.keystore.type=PEM)",
        )
    _load_key_material(context, material, settings.key_store.source_key)
    context.verify_mode = _client_auth(settings.client_auth)
    trusted = settings.trust_store.load()
    if trusted is not None:
        _load_trusted(context, trusted)
    elif context.verify_mode != ssl.CERT_NONE:
        context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    # One TLS 1.3 ticket lets a reconnecting client resume; OpenSSL's two are work for nothing
    # with clients that hold one connection per broker.
    context.num_tickets = 1
    context.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
    return context


def client_context(settings: SslSettings) -> ssl.SSLContext:
    """The context of a broker connecting to another.

    It always verifies the server's chain, checks its host name when
    ``ssl.endpoint.identification.algorithm`` is https (pass the peer's host as
    ``server_hostname``), and presents its key store, if any, to a listener that asks.
    """
    ceiling = _context_ceiling(settings.protocol)
    versions = [v for v in _enabled_versions(settings) if v <= ceiling]
    if not versions:
        raise ConfigError.invalid_value(
            "ssl.protocol",
            settings.protocol,
            "a client of this protocol offers none of the versions in ssl.enabled.protocols",
        )
    context = _new_context(False, settings, versions)
    context.check_hostname = _checks_hostname(settings.endpoint_identification_algorithm)
    material = settings.key_store.load()
    if material is not None:
        _load_key_material(context, material, settings.key_store.source_key)
    trusted = settings.trust_store.load()
    if trusted is not None:
        _load_trusted(context, trusted)
    else:
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    return context


# --------------------------------------------------------------------------- versions, ciphers


def _check_protocol_name(protocol: str) -> None:
    if protocol.upper() not in _CONTEXT_CEILINGS:
        reason = f"{protocol} SSLContext not available"
        raise ConfigError.invalid_value("ssl.protocol", protocol, reason)


def _context_ceiling(protocol: str) -> ssl.TLSVersion:
    _check_protocol_name(protocol)
    ceiling = _CONTEXT_CEILINGS[protocol.upper()]
    if ceiling is None:
        reason = "its clients offer only versions older than TLSv1.2, which are not supported"
        raise ConfigError.invalid_value("ssl.protocol", protocol, reason)
    return ceiling


def _enabled_versions(settings: SslSettings) -> list[ssl.TLSVersion]:
    """The versions of ``ssl.enabled.protocols`` (empty: Java's default) OpenSSL here speaks."""
    names = settings.enabled_protocols or DEFAULT_PROTOCOLS
    for name in names:
        if name not in _PROTOCOL_NAMES:
            reason = f"Unsupported protocol {name}"
            raise ConfigError.invalid_value("ssl.enabled.protocols", names, reason)
    versions = sorted({_SPOKEN[name] for name in names if name in _SPOKEN})
    if not versions:
        reason = f"none of them is spoken here: {ssl.OPENSSL_VERSION} speaks {', '.join(_SPOKEN)}"
        raise ConfigError.invalid_value("ssl.enabled.protocols", names, reason)
    return versions


def _new_context(
    server_side: bool, settings: SslSettings, versions: list[ssl.TLSVersion]
) -> ssl.SSLContext:
    """A context for one side with what both share: options, trust rule, versions, suites.

    A version left without any listed suite is turned off, as Java could not negotiate it.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if server_side else ssl.PROTOCOL_TLS_CLIENT)
    context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_NO_RENEGOTIATION
    context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
    suites = settings.cipher_suites
    if suites:
        tls12 = _openssl_suites(suites)
        tls13 = [name for name in suites if name in TLS13_SUITES]
        if tls12:
            _set_tls12_ciphers(context, tls12, suites)
        else:
            versions = [v for v in versions if v != ssl.TLSVersion.TLSv1_2]
        if not tls13:
            versions = [v for v in versions if v != ssl.TLSVersion.TLSv1_3]
        elif len(tls13) < len(TLS13_SUITES):
            log.warning(
                "ssl.cipher.suites lists %s, but Python's ssl module cannot restrict TLS 1.3 "
                "cipher suites: all of %s stay enabled",
                ", ".join(tls13),
                ", ".join(sorted(TLS13_SUITES)),
            )
        if not versions:
            raise ConfigError.invalid_value(
                "ssl.cipher.suites",
                suites,
                "none of these suites is usable with the enabled protocols",
            )
    context.minimum_version = versions[0]
    context.maximum_version = versions[-1]
    return context


def _openssl_suites(suites: tuple[str, ...]) -> list[str]:
    """OpenSSL's names of the TLS 1.2 suites among Java's names (signalling suites dropped)."""
    return [
        _openssl_suite(name, suites)
        for name in suites
        if name not in TLS13_SUITES and name not in _SIGNALLING_SUITES
    ]


def _openssl_suite(name: str, suites: tuple[str, ...]) -> str:
    """OpenSSL's name for a TLS 1.2 suite given by Java's name.

    TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 is ECDHE-RSA-AES128-GCM-SHA256 there, and
    TLS_RSA_WITH_AES_256_CBC_SHA is AES256-SHA.
    """
    prefix, _, rest = name.partition("_")
    key_exchange, with_, cipher_and_hash = rest.partition("_WITH_")
    cipher, _, hash_name = cipher_and_hash.rpartition("_")
    if (
        prefix != "TLS"
        or not with_
        or key_exchange not in _KEY_EXCHANGES
        or cipher not in _CIPHERS
        or hash_name not in _HASHES
    ):
        reason = f"Unsupported CipherSuite: {name}"
        raise ConfigError.invalid_value("ssl.cipher.suites", suites, reason)
    openssl = _KEY_EXCHANGES[key_exchange] + _CIPHERS[cipher]
    # OpenSSL names ChaCha20 suites without their hash (it is SHA256 for all).
    return openssl if cipher == "CHACHA20_POLY1305" else f"{openssl}-{hash_name}"


def _set_tls12_ciphers(context: ssl.SSLContext, names: list[str], suites: tuple[str, ...]) -> None:
    try:
        context.set_ciphers(":".join(names))
    except ssl.SSLError:
        missing = names
    else:
        offered = {c["name"] for c in context.get_ciphers()}
        missing = [name for name in names if name not in offered]
    if missing:
        reason = f"{ssl.OPENSSL_VERSION} does not offer {', '.join(missing)}"
        raise ConfigError.invalid_value("ssl.cipher.suites", suites, reason)


# --------------------------------------------------------------------------- authentication


def _client_auth(value: str) -> ssl.VerifyMode:
    mode = _CLIENT_AUTH.get(value.lower())
    if mode is None:
        reason = "String must be one of: required, requested, none"
        raise ConfigError.invalid_value("ssl.client.auth", value, reason)
    return mode


def _checks_hostname(algorithm: str | None) -> bool:
    if not algorithm:
        return False
    if algorithm.upper() not in _HOSTNAME_ALGORITHMS:
        reason = f"Unknown identification algorithm: {algorithm}"
        raise ConfigError.invalid_value("ssl.endpoint.identification.algorithm", algorithm, reason)
    return True


def _load_trusted(context: ssl.SSLContext, certificates: tuple[x509.Certificate, ...]) -> None:
    # Imported here, as in key_stores: only a broker with TLS loads cryptography.
    from cryptography.hazmat.primitives import serialization

    der = b"".join(c.public_bytes(serialization.Encoding.DER) for c in certificates)
    context.load_verify_locations(cadata=der)


def _load_key_material(context: ssl.SSLContext, material: KeyMaterial, key: str) -> None:
    """``load_cert_chain`` reads only files: give it one that exists in memory only."""
    with _private_file(material.pem()) as path:
        try:
            context.load_cert_chain(path)
        except ssl.SSLError as exc:
            raise ConfigError(key, f"The SSL key store cannot be used: {exc}") from exc


@contextlib.contextmanager
def _private_file(data: bytes) -> Iterator[str]:
    """A path holding ``data`` for a moment, never on disk where the system allows it.

    An anonymous memory file (``memfd``) read through ``/proc/self/fd``; elsewhere a file
    readable by this user only, in a directory of its own, removed at once.
    """
    fd = _memory_file()
    if fd is not None:
        try:
            _write_all(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    with tempfile.TemporaryDirectory(prefix="kpybroker-tls-") as directory:
        path = os.path.join(directory, "key.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)
        yield path


def _memory_file() -> int | None:
    if not hasattr(os, "memfd_create") or not os.path.isdir("/proc/self/fd"):
        return None
    try:
        return os.memfd_create("kpybroker-tls-key", os.MFD_CLOEXEC)
    except OSError:
        return None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


# --------------------------------------------------------------------------- typed reads

_T = TypeVar("_T")


def _typed(get: Callable[[str], object], key: str, kind: type[_T]) -> _T | None:
    value = get(key)
    if value is not None and not isinstance(value, kind):
        raise TypeError(f"{key} should be a {kind.__name__}, not {type(value).__name__}")
    return value
