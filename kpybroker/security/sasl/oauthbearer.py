"""SASL OAUTHBEARER (RFC 7628) as Kafka speaks it: the client's message, the server, the client.

With a good token the exchange is one round trip: the client sends
``n,[a=<authzid>],\\x01auth=Bearer <token>\\x01[key=value\\x01...]\\x01`` and the server
answers an empty challenge. With a bad one the server does not fail at once: as RFC 7628
§3.2.2 has it, it answers a JSON error (``{"status":"invalid_token"}``) as a challenge, the
client acknowledges it with a lone ``\\x01``, and only then does the server fail, with that
JSON as the message the client is given. Kafka's clients expect exactly this dance.

What makes a token good is a ``TokenValidator``'s business: unsecured (alg "none") tokens
for development in ``unsecured_jws``, signed ones checked against the identity provider's
JSON web key set in ``jwks``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum, auto
from typing import Protocol

from kpybroker.security.sasl.mechanism import InvalidCredentialsError, SaslAuthenticationError

log = logging.getLogger(__name__)

MECHANISM = "OAUTHBEARER"
SEPARATOR = "\x01"
AUTH_KEY = "auth"


# Kafka's OAuthBearerClientInitialResponse patterns. Java's [\x01-\x7F&&[^=,]] is spelled
# out, and \w is ASCII as in Java.
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_KEY = re.compile(r"[A-Za-z]+")
_VALUE = re.compile(r"[\x21-\x7e \t\r\n]+")
_CLIENT_FIRST_MESSAGE = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,\x01"
    rf"(?P<kvpairs>(?:{_KEY.pattern}={_VALUE.pattern}\x01)*)\x01"
)
_AUTH = re.compile(r"(?P<scheme>[A-Za-z0-9_]+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)")


@dataclass(frozen=True, slots=True)
class OAuthBearerToken:
    """A token that passed validation (Kafka's ``OAuthBearerToken``)."""

    value: str
    principal_name: str
    scope: frozenset[str]
    #: When the token expires, wall clock ms: its ``exp``.
    lifetime_ms: int
    #: When it became valid, wall clock ms (its ``iat``), if it says.
    start_time_ms: int | None = None


class TokenValidationError(Exception):
    """The token is not acceptable.

    ``status``, ``scope`` and ``openid_configuration`` are what the client is told (RFC 7628's
    error fields); ``str(exc)`` says why, for the broker's log only, as in Kafka.
    """

    def __init__(
        self,
        reason: str,
        *,
        status: str = "invalid_token",
        scope: str | None = None,
        openid_configuration: str | None = None,
    ) -> None:
        super().__init__(reason)
        self.status = status
        self.scope = scope
        self.openid_configuration = openid_configuration

    def json_error(self) -> str:
        """The challenge Kafka sends, byte for byte: its own formatting, values unescaped."""
        text = f'{{"status":"{self.status}"'
        if self.scope is not None:
            text += f', "scope":"{self.scope}"'
        if self.openid_configuration is not None:
            text += f', "openid-configuration":"{self.openid_configuration}"'
        return text + "}"


class TokenValidator(Protocol):
    """Checks a token the way one of Kafka's server callback handlers does."""

    async def validate(self, token_value: str) -> OAuthBearerToken:
        """The token, validated; raises ``TokenValidationError`` when it is not acceptable."""
        ...


class InvalidClientMessageError(ValueError):
    """The client's message breaks RFC 7628 (Kafka's ``SaslException``)."""


def validate_extensions(extensions: Mapping[str, str]) -> None:
    """RFC 7628 §3.1: extension names are letters and values printable; ``auth`` is taken."""
    if AUTH_KEY in extensions:
        raise InvalidClientMessageError(f"Extension name {AUTH_KEY} is invalid")
    for name, value in extensions.items():
        if not _KEY.fullmatch(name):
            raise InvalidClientMessageError(f"Extension name {name} is invalid")
        if not _VALUE.fullmatch(value):
            raise InvalidClientMessageError(
                f"Extension value ({value}) for extension {name} is invalid"
            )


@dataclass(frozen=True, slots=True)
class ClientInitialResponse:
    """The client's one message (Kafka's ``OAuthBearerClientInitialResponse``)."""

    token_value: str
    #: As sent, ``=2C``/``=3D`` escapes included (Kafka compares it undecoded).
    authorization_id: str = ""
    extensions: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        validate_extensions(self.extensions)

    @classmethod
    def parse(cls, data: bytes) -> ClientInitialResponse:
        """Raises ``InvalidClientMessageError`` with Kafka's message."""
        match = _CLIENT_FIRST_MESSAGE.fullmatch(data.decode("utf-8", errors="replace"))
        if match is None:
            raise InvalidClientMessageError("Invalid OAUTHBEARER client first message")
        properties = dict(
            pair.split("=", 1) for pair in match["kvpairs"].split(SEPARATOR) if pair
        )  # a repeated key: the last one counts, as in Kafka's Utils.parseMap
        auth = properties.pop(AUTH_KEY, None)
        if auth is None:
            raise InvalidClientMessageError(
                "Invalid OAUTHBEARER client first message: 'auth' not specified"
            )
        auth_match = _AUTH.fullmatch(auth)
        if auth_match is None:
            raise InvalidClientMessageError(
                "Invalid OAUTHBEARER client first message: invalid 'auth' format"
            )
        scheme = auth_match["scheme"]
        if scheme.lower() != "bearer":
            raise InvalidClientMessageError(
                f"Invalid scheme in OAUTHBEARER client first message: {scheme}"
            )
        return cls(auth_match["token"], match["authzid"] or "", properties)

    def to_bytes(self) -> bytes:
        """What Kafka's Java client sends (``OAuthBearerClientInitialResponse.toBytes``)."""
        authzid = f"a={self.authorization_id}" if self.authorization_id else ""
        extensions = "".join(f"{SEPARATOR}{k}={v}" for k, v in self.extensions.items())
        message = f"n,{authzid},{SEPARATOR}auth=Bearer {self.token_value}{extensions}"
        return (message + SEPARATOR + SEPARATOR).encode()


class OAuthBearerSaslServer:
    """Kafka's ``OAuthBearerSaslServer``: one authentication attempt.

    Kafka's two validators accept every SASL extension, so the server keeps them all, for
    whoever wants them (Kafka's negotiated properties).
    """

    mechanism = MECHANISM

    def __init__(self, validator: TokenValidator) -> None:
        self._validator = validator
        #: The token and the client's extensions, once authenticated.
        self._result: tuple[OAuthBearerToken, Mapping[str, str]] | None = None
        #: The JSON error last sent as a challenge, until the client acknowledges it.
        self._error: str | None = None

    async def evaluate(self, response: bytes) -> bytes:
        if response == SEPARATOR.encode() and self._error is not None:
            log.debug("The client acknowledged our error; failing the authentication")
            raise SaslAuthenticationError(self._error)
        # Anything else starts over: a client may answer the error with a new token.
        self._error = None
        try:
            message = ClientInitialResponse.parse(response)
        except InvalidClientMessageError as e:
            log.debug("%s", e)
            raise InvalidCredentialsError(MECHANISM) from e
        try:
            token = await self._validator.validate(message.token_value)
        except TokenValidationError as e:
            self._error = e.json_error()
            log.debug("Token rejected (%s): %s", e, self._error)
            return self._error.encode()
        # An authorization id may be given (RFC 4422) but must name the token's principal.
        if message.authorization_id and message.authorization_id != token.principal_name:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id "
                f"({message.authorization_id}) that is different from the token's principal "
                f"name ({token.principal_name})"
            )
        self._result = token, message.extensions
        log.debug("Successfully authenticate User=%s", token.principal_name)
        return b""

    @property
    def is_complete(self) -> bool:
        return self._result is not None

    def _completed(self) -> tuple[OAuthBearerToken, Mapping[str, str]]:
        if self._result is None:
            raise RuntimeError("Authentication exchange has not completed")
        return self._result

    @property
    def token(self) -> OAuthBearerToken:
        """The validated token (Kafka's ``OAUTHBEARER.token`` negotiated property)."""
        return self._completed()[0]

    @property
    def extensions(self) -> Mapping[str, str]:
        """The client's SASL extensions."""
        return self._completed()[1]

    @property
    def authorization_id(self) -> str:
        return self.token.principal_name

    @property
    def credential_expiry_ms(self) -> int | None:
        return self.token.lifetime_ms


class _ClientState(Enum):
    SEND_CLIENT_FIRST_MESSAGE = auto()
    RECEIVE_SERVER_FIRST_MESSAGE = auto()
    RECEIVE_SERVER_MESSAGE_AFTER_FAILURE = auto()
    COMPLETE = auto()


class OAuthBearerSaslClient:
    """Kafka's ``OAuthBearerSaslClient`` with a token in hand.

    A broker authenticating to a peer, or a test, builds one per attempt with a current
    token. On an error challenge it acknowledges with ``\\x01`` as Kafka's client does and
    keeps the JSON in ``server_error``; the server's failure follows.
    """

    mechanism = MECHANISM

    def __init__(self, token_value: str, extensions: Mapping[str, str] | None = None) -> None:
        self._message = ClientInitialResponse(token_value, extensions=dict(extensions or {}))
        self._state = _ClientState.SEND_CLIENT_FIRST_MESSAGE
        self.server_error: str | None = None

    def initial_response(self) -> bytes:
        self._state = _ClientState.RECEIVE_SERVER_FIRST_MESSAGE
        return self._message.to_bytes()

    def evaluate(self, challenge: bytes) -> bytes:
        """The acknowledgement of an error challenge; after an empty one (success) nothing
        more is to be sent, and the empty result says so."""
        if self._state is not _ClientState.RECEIVE_SERVER_FIRST_MESSAGE:
            raise SaslAuthenticationError(
                f"Unexpected challenge in Sasl client state {self._state.name}"
            )
        if challenge:
            self.server_error = challenge.decode("utf-8", errors="replace")
            log.debug("Acknowledging the server's error: %s", self.server_error)
            self._state = _ClientState.RECEIVE_SERVER_MESSAGE_AFTER_FAILURE
            return SEPARATOR.encode()
        self._state = _ClientState.COMPLETE
        return b""

    @property
    def is_complete(self) -> bool:
        return self._state is _ClientState.COMPLETE
