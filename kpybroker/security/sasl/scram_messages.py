"""The four SCRAM messages (RFC 5802 section 7), read and written as Kafka's ``ScramMessages``.

Kafka checks each message against one regular expression, and what a broker
accepts is defined by those: they are reproduced here (Java's character-class
intersections spelled out as ranges). Kafka also rebuilds the pieces of the
AuthMessage from what it parsed rather than keeping the bytes it received: the
``m=`` reserved field is dropped from client-first-message-bare and the
extensions of the final message are left out of client-final-without-proof.
Both sides here do the same, or proofs would not match a Kafka peer's.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

_VALUE_SAFE = r"[\x01-\x2b\x2d-\x3c\x3e-\x7f]+"  # [\x01-\x7F&&[^=,]]+
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"  # [\x01-\x7F&&[^,]]+
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"  # [\x21-\x7E&&[^,]]+
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_BASE64 = r"(?:[a-zA-Z0-9/+]{4})*(?:[a-zA-Z0-9/+]{3}=|[a-zA-Z0-9/+]{2}==)?"
_RESERVED = rf"(?:m={_VALUE},)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"

_CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,{_RESERVED}"
    rf"n=(?P<saslname>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS})"
)
_SERVER_FIRST = re.compile(
    rf"{_RESERVED}r=(?P<nonce>{_PRINTABLE}),s=(?P<salt>{_BASE64}),i=(?P<iterations>[0-9]+)"
    rf"{_EXTENSIONS}"
)
_CLIENT_FINAL = re.compile(
    rf"c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS},p=(?P<proof>{_BASE64})"
)
_SERVER_FINAL = re.compile(
    rf"(?:e=(?P<error>{_VALUE_SAFE}))|(?:v=(?P<signature>{_BASE64})){_EXTENSIONS}"
)

#: The one extension Kafka acts on: the client authenticates with a delegation token.
TOKEN_AUTH_EXTENSION = "tokenauth"
#: base64("n,,"): no channel binding, no authorization id, as Kafka's client sends it.
GS2_HEADER_NO_BINDING = b"n,,"


class ScramMessageError(ValueError):
    """A message does not have the SCRAM form; ``str(exc)`` is Kafka's message."""


def sasl_name(username: str) -> str:
    """A username as SCRAM's ``saslname``: ``=`` as ``=3D``, ``,`` as ``=2C``."""
    return username.replace("=", "=3D").replace(",", "=2C")


def username_from_sasl_name(name: str) -> str:
    """The username a ``saslname`` stands for (``ScramFormatter.username``).

    Raises ``ValueError`` when an ``=`` is not part of ``=2C`` or ``=3D``.
    """
    username = name.replace("=2C", ",")
    if "=" in username.replace("=3D", ""):
        raise ValueError(f"Invalid username: {name}")
    return username.replace("=3D", "=")


@dataclass(frozen=True, slots=True)
class ClientFirstMessage:
    """``gs2-header [reserved-mext ","] username "," nonce ["," extensions]``; Kafka
    supports only the gs2 flag ``n`` (no channel binding)."""

    sasl_name: str
    nonce: str
    authorization_id: str = ""
    extensions: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, data: bytes) -> ClientFirstMessage:
        message = _decode(data)
        match = _CLIENT_FIRST.fullmatch(message)
        if match is None:
            raise ScramMessageError(f"Invalid SCRAM client first message format: {message}")
        return cls(
            sasl_name=match["saslname"],
            nonce=match["nonce"],
            authorization_id=match["authzid"] or "",
            extensions=_parse_extensions(match["extensions"]),
        )

    @property
    def token_authenticated(self) -> bool:
        """``tokenauth=true`` (any case, as Java's ``Boolean.parseBoolean``)."""
        return self.extensions.get(TOKEN_AUTH_EXTENSION, "").lower() == "true"

    @property
    def bare(self) -> str:
        """client-first-message-bare as Kafka rebuilds it for the AuthMessage."""
        extensions = "".join(f",{key}={value}" for key, value in self.extensions.items())
        return f"n={self.sasl_name},r={self.nonce}{extensions}"

    def to_bytes(self) -> bytes:
        authzid = f"a={self.authorization_id}" if self.authorization_id else ""
        return f"n,{authzid},{self.bare}".encode()


@dataclass(frozen=True, slots=True)
class ServerFirstMessage:
    """``[reserved-mext ","] nonce "," salt "," iteration-count ["," extensions]``; the
    nonce is the client's followed by the server's."""

    nonce: str
    salt: bytes
    iterations: int

    @classmethod
    def parse(cls, data: bytes) -> ServerFirstMessage:
        message = _decode(data)
        match = _SERVER_FIRST.fullmatch(message)
        if match is None:
            raise ScramMessageError(f"Invalid SCRAM server first message format: {message}")
        digits = match["iterations"].lstrip("0") or "0"
        if len(digits) > 10 or int(digits) >= 2**31:  # Java's Integer.parseInt fails
            raise ScramMessageError("Invalid SCRAM server first message format: invalid iterations")
        iterations = int(digits)
        if iterations <= 0:
            raise ScramMessageError(
                f"Invalid SCRAM server first message format: invalid iterations {iterations}"
            )
        return cls(match["nonce"], base64.b64decode(match["salt"]), iterations)

    def to_message(self) -> str:
        return f"r={self.nonce},s={_b64(self.salt)},i={self.iterations}"

    def to_bytes(self) -> bytes:
        return self.to_message().encode()


@dataclass(frozen=True, slots=True)
class ClientFinalMessage:
    """``channel-binding "," nonce ["," extensions] "," proof``."""

    channel_binding: bytes
    nonce: str
    proof: bytes

    @classmethod
    def parse(cls, data: bytes) -> ClientFinalMessage:
        message = _decode(data)
        match = _CLIENT_FINAL.fullmatch(message)
        if match is None:
            raise ScramMessageError(f"Invalid SCRAM client final message format: {message}")
        return cls(
            channel_binding=base64.b64decode(match["channel"]),
            nonce=match["nonce"],
            proof=base64.b64decode(match["proof"]),
        )

    @property
    def without_proof(self) -> str:
        """client-final-message-without-proof as Kafka rebuilds it for the AuthMessage."""
        return f"c={_b64(self.channel_binding)},r={self.nonce}"

    def to_bytes(self) -> bytes:
        return f"{self.without_proof},p={_b64(self.proof)}".encode()


@dataclass(frozen=True, slots=True)
class ServerFinalMessage:
    """``"e=" server-error-value`` or ``"v=" base64(ServerSignature) ["," extensions]``;
    exactly one of ``error`` and ``server_signature`` is set."""

    error: str | None = None
    server_signature: bytes | None = None

    @classmethod
    def parse(cls, data: bytes) -> ServerFinalMessage:
        message = _decode(data)
        match = _SERVER_FINAL.fullmatch(message)
        if match is None:
            raise ScramMessageError(f"Invalid SCRAM server final message format: {message}")
        if match["error"] is not None:
            return cls(error=match["error"])
        return cls(server_signature=base64.b64decode(match["signature"]))

    def to_bytes(self) -> bytes:
        if self.error is not None:
            return f"e={self.error}".encode()
        assert self.server_signature is not None
        return f"v={_b64(self.server_signature)}".encode()


def auth_message(
    client_first: ClientFirstMessage,
    server_first: ServerFirstMessage,
    client_final: ClientFinalMessage,
) -> bytes:
    """AuthMessage: what both client proof and server signature sign."""
    return f"{client_first.bare},{server_first.to_message()},{client_final.without_proof}".encode()


def _parse_extensions(text: str) -> dict[str, str]:
    """``,k=v,k2=v2`` -> {k: v, k2: v2}; a repeated key keeps its last value."""
    return dict(item.split("=", 1) for item in text.split(",")[1:])


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
