"""SCRAM credentials: the mechanisms, RFC 5802's key derivations, and Kafka's stored text form.

A broker never holds a SCRAM user's password, only what RFC 5802 lets it
verify a client with: the salt and iteration count it hands the client, the
stored key (H(ClientKey)) and the server key. Kafka keeps these per user and
mechanism: in ZooKeeper mode as text in ``/config/users/<user>``
(``SCRAM-SHA-256=salt=...,stored_key=...,server_key=...,iterations=4096``),
which ``credential_to_string`` and ``credential_from_string`` write and read
exactly as ``ScramCredentialUtils`` does.
"""

from __future__ import annotations

import base64
import enum
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass

#: RFC 7677's minimum; Kafka refuses a credential with fewer (``ScramMechanism.minIterations``).
MIN_ITERATIONS = 4096
#: The most iterations AlterUserScramCredentials accepts (``ScramMechanism.maxIterations``).
MAX_ITERATIONS = 16384


class ScramMechanism(enum.Enum):
    """SCRAM-SHA-256 and SCRAM-SHA-512, with the hash each is built on.

    ``type`` is the mechanism's number in AlterUserScramCredentials and
    DescribeUserScramCredentials (``ScramMechanism.type()``); ``name`` is Kafka's enum
    name (``SCRAM_SHA_256``), which its messages print.
    """

    SCRAM_SHA_256 = (1, "sha256")
    SCRAM_SHA_512 = (2, "sha512")

    def __init__(self, type_: int, hash_name: str) -> None:
        self.type = type_
        self.hash_name = hash_name

    @property
    def mechanism_name(self) -> str:
        """The name clients ask for in SaslHandshake, e.g. ``SCRAM-SHA-256``."""
        return self.name.replace("_", "-")

    @property
    def min_iterations(self) -> int:
        return MIN_ITERATIONS

    @property
    def max_iterations(self) -> int:
        return MAX_ITERATIONS

    @classmethod
    def for_mechanism_name(cls, mechanism_name: str) -> ScramMechanism | None:
        """The mechanism a SASL name stands for, or None if it is not a SCRAM one."""
        return next((m for m in cls if m.mechanism_name == mechanism_name), None)

    @classmethod
    def from_type(cls, type_: int) -> ScramMechanism | None:
        return next((m for m in cls if m.type == type_), None)

    def hash(self, data: bytes) -> bytes:
        """H(data)."""
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        """HMAC(key, data)."""
        return hmac.digest(key, data, self.hash_name)

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        """SaltedPassword := Hi(password, salt, i), which is PBKDF2 with this HMAC.

        Kafka does no SASLprep: the password is taken as UTF-8, as is.
        """
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode(), salt, iterations)

    def client_key(self, salted_password: bytes) -> bytes:
        return self.hmac(salted_password, b"Client Key")

    def server_key(self, salted_password: bytes) -> bytes:
        return self.hmac(salted_password, b"Server Key")

    def client_proof(self, salted_password: bytes, auth_message: bytes) -> bytes:
        """ClientProof := ClientKey XOR HMAC(H(ClientKey), AuthMessage)."""
        client_key = self.client_key(salted_password)
        return _xor(client_key, self.hmac(self.hash(client_key), auth_message))

    def verify_client_proof(self, stored_key: bytes, auth_message: bytes, proof: bytes) -> bool:
        """Whether H(ClientSignature XOR proof) is the stored key, compared in constant time.

        A proof of the wrong length does not verify.
        """
        signature = self.hmac(stored_key, auth_message)
        if len(proof) != len(signature):
            return False
        return hmac.compare_digest(self.hash(_xor(signature, proof)), stored_key)

    def server_signature(self, server_key: bytes, auth_message: bytes) -> bytes:
        """ServerSignature := HMAC(ServerKey, AuthMessage), which proves the server to the
        client."""
        return self.hmac(server_key, auth_message)

    def credential(
        self, password: str, iterations: int, salt: bytes | None = None
    ) -> ScramCredential:
        """A new credential for ``password``; with a fresh salt of Kafka's form unless one is
        given (``ScramFormatter.generateCredential``)."""
        salt = secure_random_string().encode() if salt is None else salt
        return self.credential_from_salted_password(
            salt, self.salted_password(password, salt, iterations), iterations
        )

    def credential_from_salted_password(
        self, salt: bytes, salted_password: bytes, iterations: int
    ) -> ScramCredential:
        """The credential for a salted password, which is what AlterUserScramCredentials
        carries instead of the password."""
        return ScramCredential(
            salt=salt,
            stored_key=self.hash(self.client_key(salted_password)),
            server_key=self.server_key(salted_password),
            iterations=iterations,
        )


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What the server keeps for one user and mechanism (RFC 5802 section 5)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def secure_random_string() -> str:
    """130 random bits in base 36, as ``ScramFormatter.secureRandomString`` makes nonces
    (and, as its UTF-8 bytes, salts)."""
    value = secrets.randbits(130)
    digits = []
    while value:
        value, digit = divmod(value, 36)
        digits.append("0123456789abcdefghijklmnopqrstuvwxyz"[digit])
    return "".join(reversed(digits)) or "0"


_FIELDS = ("salt", "stored_key", "server_key", "iterations")


#: ``(mechanism name, username) -> credential``, None for a user without one.
CredentialLookup = Callable[[str, str], ScramCredential | None]


def credential_to_string(credential: ScramCredential) -> str:
    """``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``."""
    b64 = base64.b64encode
    return (
        f"salt={b64(credential.salt).decode()},"
        f"stored_key={b64(credential.stored_key).decode()},"
        f"server_key={b64(credential.server_key).decode()},"
        f"iterations={credential.iterations}"
    )


def credential_from_string(text: str) -> ScramCredential:
    """Reads ``credential_to_string``'s form; ``ValueError`` when it is not one.

    As Kafka: fields in any order, a repeated field's last value wins, a trailing
    comma is ignored (Java's ``split``), base64 may lack its padding, iterations
    may carry a sign. Every failure says ``Credentials not valid: <text>``.
    """
    invalid = ValueError(f"Credentials not valid: {text}")
    fields: dict[str, str] = {}
    tokens = text.split(",")
    while tokens and not tokens[-1]:
        tokens.pop()
    for token in tokens:
        key, equals, value = token.partition("=")
        if not key or not equals:
            raise invalid
        fields[key] = value
    if set(fields) != set(_FIELDS):
        raise invalid
    iterations = fields["iterations"]
    if not _JAVA_INT.fullmatch(iterations) or not -(2**31) <= int(iterations) < 2**31:
        raise invalid
    try:
        salt, stored_key, server_key = (
            _decode_base64(fields[key]) for key in ("salt", "stored_key", "server_key")
        )
    except ValueError:
        raise invalid from None
    return ScramCredential(salt, stored_key, server_key, int(iterations))


_JAVA_INT = re.compile(r"[+-]?[0-9]+")
# What java.util.Base64's basic decoder accepts: padding is optional, but a final unit
# of one character, or of two with a single "=", is refused, as is anything after "=".
_JAVA_BASE64 = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}(?:==)?|[A-Za-z0-9+/]{3}=?)?")


def _decode_base64(text: str) -> bytes:
    if not _JAVA_BASE64.fullmatch(text):
        raise ValueError(text)
    body = text.rstrip("=")
    return base64.b64decode(body + "=" * (-len(body) % 4))


def _xor(first: bytes, second: bytes) -> bytes:
    return bytes(a ^ b for a, b in zip(first, second, strict=True))
