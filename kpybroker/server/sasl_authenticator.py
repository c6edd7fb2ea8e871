"""The server side of SASL on one connection, before any request reaches a handler.

This is Kafka's ``SaslServerAuthenticator``: on a SASL listener the first
frames of a connection are read here, not dispatched. The client may ask
ApiVersions (once, before the handshake), must send SaslHandshake, and then
SaslAuthenticate requests (handshake v1), or bare tokens framed by their size
(handshake v0), until the mechanism is done. Anything else ends the attempt.

A failed attempt is not answered at once: Kafka holds the failure answer (if
the step has one) and the close for ``connection.failed.authentication.delay.ms``
so that guessing passwords is slow, and logs one line with the client's
address. :class:`AuthFailure` carries that answer and the reason for the log.

After success the connection serves requests as that principal. When the
session has a lifetime (``connections.max.reauth.ms``, or the credential's
remaining life, whichever is shorter; SaslAuthenticate v1+ tells the client),
a SaslHandshake arriving later, at most one a second, starts a new
authentication on the same connection (KIP-368), with the same mechanism and
the same principal required; past the lifetime the connection serves nothing
but that. Without a lifetime a later SaslHandshake goes to its handler, which
answers ILLEGAL_SASL_STATE, as Kafka does.

A request other than SaslAuthenticate in the middle of an exchange is answered
with that API's error response (ILLEGAL_SASL_STATE), and the attempt fails.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from kpybroker.protocol._codec import DecodeError
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.framing import (
    API_VERSIONS_KEY,
    frame_response,
    parse_request_header,
    peek_api,
    response_header,
)
from kpybroker.protocol.messages import SCHEMAS
from kpybroker.protocol.messages.metadata import MetadataResponseTopic
from kpybroker.protocol.messages.sasl_authenticate import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
)
from kpybroker.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from kpybroker.security.principal import KafkaPrincipal
from kpybroker.security.sasl.mechanism import (
    InvalidCredentialsError,
    SaslAuthenticationError,
    SaslServer,
    invalid_credentials_message,
)
from kpybroker.security.sasl.sasl_settings import SaslSettings

log = logging.getLogger(__name__)

SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36
METADATA_KEY = 3
#: Kafka's ``MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS``: the least time between two starts.
MIN_REAUTH_INTERVAL_S = 1.0
_MAX_SASL_HANDSHAKE_VERSION = 1
_MAX_SASL_AUTHENTICATE_VERSION = 2


class AuthFailure(Exception):
    """The attempt failed: ``reason`` goes to the log; ``answer`` (response parts, or None)
    is sent after the failed-authentication delay, and then the connection is closed."""

    def __init__(self, reason: str, answer: list[Any] | None = None) -> None:
        super().__init__(reason)
        self.answer = answer


class _State(enum.Enum):
    HANDSHAKE_OR_VERSIONS = enum.auto()
    HANDSHAKE = enum.auto()
    AUTHENTICATE = enum.auto()
    REAUTH_BAD_MECHANISM = enum.auto()
    COMPLETE = enum.auto()


#: Answers an ApiVersions frame as the broker does: (response parts, whether it succeeded).
ApiVersionsAnswer = Callable[[bytearray], Awaitable[tuple[list[Any], bool]]]


class SaslAuthenticator:
    """The SASL state of one connection; ``receive`` takes each frame until ``complete``."""

    def __init__(self, settings: SaslSettings, answer_api_versions: ApiVersionsAnswer) -> None:
        self.settings = settings
        self.answer_api_versions = answer_api_versions
        self.state = _State.HANDSHAKE_OR_VERSIONS
        self.server: SaslServer | None = None
        self.mechanism: str | None = None
        self.principal: KafkaPrincipal | None = None
        #: Kafka frames around the tokens (handshake v1+) or bare tokens (v0).
        self.framed_tokens = True
        #: ``time.monotonic()`` past which the session serves only re-authentication.
        self.session_expiry: float | None = None
        self._last_reauthentication = float("-inf")
        self._previous: tuple[str, KafkaPrincipal] | None = None  # while re-authenticating
        self._bad_mechanism_message = ""

    @property
    def complete(self) -> bool:
        return self.state is _State.COMPLETE

    @property
    def reauthenticating(self) -> bool:
        return self._previous is not None

    def session_expired(self, now: float) -> bool:
        return self.session_expiry is not None and now >= self.session_expiry

    def wants_reauthentication(self, frame: bytearray, now: float) -> bool:
        """Whether this frame, on an authenticated connection, starts a re-authentication:
        a SaslHandshake on a session with a lifetime, not within a second of the last
        start (Kafka's ``maybeBeginServerReauthentication``). Other handshakes go to the
        handler."""
        if not self.complete or self.session_expiry is None:
            return False
        if now - self._last_reauthentication < MIN_REAUTH_INTERVAL_S:
            return False
        try:
            return peek_api(frame)[0] == SASL_HANDSHAKE_KEY
        except DecodeError:
            return False

    def begin_reauthentication(self, now: float) -> None:
        assert self.mechanism is not None and self.principal is not None
        self._last_reauthentication = now
        self._previous = (self.mechanism, self.principal)
        self.state = _State.HANDSHAKE
        self.server = None

    async def receive(self, frame: bytearray) -> list[Any]:
        """Take one frame; return the answer to send.

        Raises ``AuthFailure`` when the attempt fails, and ``DecodeError`` (the
        connection is closed at once, as Kafka does for a request it cannot parse).
        """
        if self.state is _State.REAUTH_BAD_MECHANISM:
            raise AuthFailure(self._bad_mechanism_message)
        if self.state is _State.AUTHENTICATE:
            if self.framed_tokens:
                return await self._authenticate_request(frame)
            return await self._raw_token(frame)
        return await self._handshake_or_versions(frame)

    # -- before the mechanism is chosen --------------------------------------------------

    async def _handshake_or_versions(self, frame: bytearray) -> list[Any]:
        try:
            api_key, api_version, correlation_id = peek_api(frame)
        except DecodeError:
            api_key = -1
        if api_key not in SCHEMAS:
            # Kafka falls back to a GSSAPI token here (0.9 clients); GSSAPI is not offered.
            raise AuthFailure(
                "Exception handling first SASL packet from client, GSSAPI is not supported "
                "by server"
            )
        if api_key == API_VERSIONS_KEY and not self.reauthenticating:
            if self.state is not _State.HANDSHAKE_OR_VERSIONS:
                raise DecodeError(
                    f"Unexpected ApiVersions request received during SASL authentication "
                    f"state {self.state.name}"
                )
            answer, succeeded = await self.answer_api_versions(frame)
            if succeeded:
                self.state = _State.HANDSHAKE
            return answer
        if api_key != SASL_HANDSHAKE_KEY:
            raise AuthFailure(
                f"Unexpected Kafka request of type {_api_name(api_key)} during SASL handshake."
            )
        if api_version > _MAX_SASL_HANDSHAKE_VERSION:
            raise DecodeError(f"Version {api_version} is not supported for apiKey SASL_HANDSHAKE")
        header = parse_request_header(frame)
        request, _ = SaslHandshakeRequest.decode(frame, header.body_offset, api_version)
        self.framed_tokens = api_version >= 1
        mechanisms = list(self.settings.mechanisms)
        mechanism = request.mechanism
        if mechanism not in mechanisms:
            answer = _answer(
                SASL_HANDSHAKE_KEY,
                api_version,
                correlation_id,
                SaslHandshakeResponse(
                    error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=mechanisms
                ),
            )
            raise AuthFailure(f"Unsupported SASL mechanism {mechanism}", answer)
        answer = _answer(
            SASL_HANDSHAKE_KEY,
            api_version,
            correlation_id,
            SaslHandshakeResponse(error_code=ErrorCode.NONE, mechanisms=mechanisms),
        )
        if self._previous is not None and mechanism != self._previous[0]:
            self._bad_mechanism_message = (
                f"SASL mechanism '{mechanism}' requested by client is not supported for "
                f"re-authentication of mechanism '{self._previous[0]}'"
            )
            self.state = _State.REAUTH_BAD_MECHANISM
            return answer
        self.mechanism = mechanism
        self.server = self.settings.new_server(mechanism)
        self.state = _State.AUTHENTICATE
        return answer

    # -- the mechanism's exchange --------------------------------------------------------

    async def _authenticate_request(self, frame: bytearray) -> list[Any]:
        api_key, api_version, correlation_id = peek_api(frame)
        if api_key != SASL_AUTHENTICATE_KEY:
            raise AuthFailure(
                f"Unexpected Kafka request of type {_api_name(api_key)} during SASL "
                "authentication.",
                _out_of_turn_answer(frame, api_key, api_version, correlation_id),
            )
        if api_version > _MAX_SASL_AUTHENTICATE_VERSION:
            raise DecodeError(
                f"Version {api_version} is not supported for apiKey SASL_AUTHENTICATE"
            )
        header = parse_request_header(frame)
        request, _ = SaslAuthenticateRequest.decode(frame, header.body_offset, api_version)
        try:
            token = await self._evaluate(request.auth_bytes)
        except SaslAuthenticationError as exc:
            message = self._client_message(exc)
            failed = SaslAuthenticateResponse(
                error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=message
            )
            raise AuthFailure(
                _reason(message, exc),
                _answer(SASL_AUTHENTICATE_KEY, api_version, correlation_id, failed),
            ) from None
        lifetime_ms = self._finish() if self.server is not None and self.server.is_complete else 0
        answer = SaslAuthenticateResponse(
            error_code=ErrorCode.NONE, auth_bytes=token, session_lifetime_ms=lifetime_ms
        )
        return _answer(SASL_AUTHENTICATE_KEY, api_version, correlation_id, answer)

    async def _raw_token(self, frame: bytearray) -> list[Any]:
        """Handshake v0: the frame is the bare token, the answer the bare challenge (sent
        even when empty, as Kafka does with the empty array a mechanism returns)."""
        try:
            token = await self._evaluate(bytes(frame))
        except SaslAuthenticationError as exc:
            raise AuthFailure(_reason(self._client_message(exc), exc)) from None
        if self.server is not None and self.server.is_complete:
            self._finish()
        return frame_response(b"", [token])

    def _client_message(self, failure: SaslAuthenticationError) -> str:
        if isinstance(failure, InvalidCredentialsError) and self.reauthenticating:
            return invalid_credentials_message(failure.mechanism, reauthentication=True)
        return str(failure)

    async def _evaluate(self, token: bytes) -> bytes:
        assert self.server is not None
        answer = await self.server.evaluate(token)
        if self.server.is_complete:
            principal = KafkaPrincipal.user(self.server.authorization_id)
            if self._previous is not None and principal != self._previous[1]:
                before = self._previous[1]
                raise SaslAuthenticationError(
                    "Cannot change principals during re-authentication from "
                    f"{before.type}.{before.name}: {principal.type}.{principal.name}"
                )
        return answer

    def _finish(self) -> int:
        """Authentication succeeded: fix the principal and the session's lifetime (ms)."""
        server = self.server
        assert server is not None and self.mechanism is not None
        self.principal = KafkaPrincipal.user(server.authorization_id)
        self.state = _State.COMPLETE
        self._previous = None
        lifetime_ms = 0
        reauth_ms = self.settings.reauth_ms(self.mechanism)
        expiry_ms = server.credential_expiry_ms
        if expiry_ms is not None or reauth_ms > 0:
            remaining = None if expiry_ms is None else expiry_ms - time.time() * 1000
            if remaining is None:
                lifetime_ms = reauth_ms
            elif reauth_ms <= 0:
                lifetime_ms = max(0, int(remaining))
            else:
                lifetime_ms = max(0, int(min(remaining, reauth_ms)))
            self.session_expiry = time.monotonic() + lifetime_ms / 1000
        else:
            self.session_expiry = None
        self.server = None
        return lifetime_ms


def _out_of_turn_answer(
    frame: bytearray, api_key: int, api_version: int, correlation_id: int
) -> list[Any] | None:
    """The error response of a request that came in the middle of a SASL exchange (Kafka's
    ``getErrorResponse`` with ILLEGAL_SASL_STATE); None where it cannot even be parsed."""
    module = SCHEMAS[api_key]
    low, high = module.VERSIONS
    if not low <= api_version <= high:
        return None
    header = parse_request_header(frame)
    request, _ = getattr(module, module.NAME + "Request").decode(
        frame, header.body_offset, api_version
    )
    response = getattr(module, module.NAME + "Response")()
    if hasattr(response, "error_code"):
        response.error_code = ErrorCode.ILLEGAL_SASL_STATE
    if api_key == METADATA_KEY:
        response.cluster_id = None
        response.topics = [
            MetadataResponseTopic(
                error_code=ErrorCode.ILLEGAL_SASL_STATE,
                name=topic.name or "",
                topic_id=topic.topic_id,
                is_internal=False,
            )
            for topic in request.topics or ()
        ]
    return _answer(api_key, api_version, correlation_id, response)


def _reason(message: str, failure: BaseException) -> str:
    """What the log says of a failure: the client's message, and the reason it was not told."""
    cause = failure.__cause__
    return message if cause is None else f"{message}: {cause}"


def _answer(api_key: int, api_version: int, correlation_id: int, response: Any) -> list[Any]:
    return frame_response(
        response_header(api_key, api_version, correlation_id), response.encode(api_version)
    )


def _api_name(api_key: int) -> str:
    """Kafka's ``ApiKeys`` constant name (METADATA, FETCH, ...) of a known key."""
    module = SCHEMAS.get(api_key)
    if module is None:
        return str(api_key)
    name = module.NAME
    return "".join(f"_{c}" if c.isupper() and i else c for i, c in enumerate(name)).upper()
