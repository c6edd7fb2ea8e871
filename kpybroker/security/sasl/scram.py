"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512: Kafka's ``ScramSaslServer`` and ``ScramSaslClient``.

The exchange (RFC 5802): client-first (username and nonce), server-first
(combined nonce, salt, iterations), client-final (proof of the password),
server-final (proof that the server knew the credential). The server looks the
user's credential up once, by mechanism and username, through a callable, so
it has no opinion on where credentials live.

What the client is told when the server refuses follows Kafka. Most failures
are a plain ``SaslException`` in Kafka, whose message its authenticator keeps
for the broker's log and replaces, in the SaslAuthenticate answer, with
``invalid_credentials_message``: a client cannot tell a malformed message, an
unknown user or a wrong password apart from the text. Here those raise
``InvalidCredentialsError``, Kafka's own message being the ``ScramFailure`` set
as its ``__cause__``. The one failure Kafka tells the
client about in its own words is an authorization id other than the username.

As in Kafka, an unknown user fails at once, on the client-first message; the
server does not invent a salt to carry the exchange on to the proof.
Delegation tokens are not supported: ``tokenauth=true`` fails as Kafka fails a
token it does not know.
"""

from __future__ import annotations

import dataclasses
import enum
import hmac
from collections.abc import Mapping
from typing import NoReturn, TypeVar

from kpybroker.security.sasl.mechanism import InvalidCredentialsError, SaslAuthenticationError
from kpybroker.security.sasl.scram_credentials import (
    CredentialLookup,
    ScramCredential,
    ScramMechanism,
    secure_random_string,
)
from kpybroker.security.sasl.scram_messages import (
    GS2_HEADER_NO_BINDING,
    ClientFinalMessage,
    ClientFirstMessage,
    ScramMessageError,
    ServerFinalMessage,
    ServerFirstMessage,
    auth_message,
    sasl_name,
    username_from_sasl_name,
)

_ClientMessage = TypeVar("_ClientMessage", ClientFirstMessage, ClientFinalMessage)
_ServerMessage = TypeVar("_ServerMessage", ServerFirstMessage, ServerFinalMessage)

AUTHZID_MISMATCH = (
    "Authentication failed: Client requested an authorization id that is different from username"
)


class ScramFailure(Exception):
    """Why the server refused, in Kafka's words: for the broker's log, never the client."""


class _ServerState(enum.Enum):
    RECEIVE_CLIENT_FIRST_MESSAGE = enum.auto()
    RECEIVE_CLIENT_FINAL_MESSAGE = enum.auto()
    COMPLETE = enum.auto()
    FAILED = enum.auto()


class ScramSaslServer:
    """The server side of one SCRAM authentication (``SaslServer``)."""

    mechanism: str

    def __init__(self, mechanism: ScramMechanism, credentials: CredentialLookup) -> None:
        self.mechanism = mechanism.mechanism_name
        self._scram = mechanism
        self._credentials = credentials
        self._state = _ServerState.RECEIVE_CLIENT_FIRST_MESSAGE
        self._authorization_id = ""
        # Between the two messages: what the AuthMessage and the proof check need.
        self._client_first: ClientFirstMessage | None = None
        self._server_first: ServerFirstMessage | None = None
        self._credential: ScramCredential | None = None

    async def evaluate(self, response: bytes) -> bytes:
        try:
            if self._state is _ServerState.RECEIVE_CLIENT_FIRST_MESSAGE:
                return self._receive_client_first(response)
            if self._state is _ServerState.RECEIVE_CLIENT_FINAL_MESSAGE:
                return self._receive_client_final(response)
        except SaslAuthenticationError:
            self._clear()
            self._state = _ServerState.FAILED
            raise
        raise RuntimeError(f"Unexpected challenge in Sasl server state {self._state.name}")

    @property
    def is_complete(self) -> bool:
        return self._state is _ServerState.COMPLETE

    @property
    def authorization_id(self) -> str:
        if not self.is_complete:
            raise RuntimeError("Authentication exchange has not completed")
        return self._authorization_id

    @property
    def credential_expiry_ms(self) -> int | None:
        return None  # only delegation tokens expire, and they are not supported

    def _receive_client_first(self, response: bytes) -> bytes:
        client_first = self._parse(ClientFirstMessage, response)
        # cannot fail: the message's pattern admits only "=" as part of "=2C" or "=3D"
        username = username_from_sasl_name(client_first.sasl_name)
        if client_first.token_authenticated:
            self._reject(f"Token Authentication failed: Invalid tokenId : {username}")
        try:
            credential = self._credentials(self.mechanism, username)
        except Exception as exc:  # Kafka fails the exchange, whatever broke the lookup
            self._reject("Authentication failed: Credentials could not be obtained", exc)
        if credential is None:
            self._reject("Authentication failed: Invalid user credentials")
        if client_first.authorization_id and client_first.authorization_id != username:
            raise SaslAuthenticationError(AUTHZID_MISMATCH)
        if credential.iterations < self._scram.min_iterations:
            self._reject(
                f"Iterations {credential.iterations} is less than the minimum "
                f"{self._scram.min_iterations} for {self._scram.name}"
            )
        server_first = ServerFirstMessage(
            nonce=client_first.nonce + secure_random_string(),
            salt=credential.salt,
            iterations=credential.iterations,
        )
        self._client_first, self._server_first = client_first, server_first
        self._credential = credential
        self._authorization_id = username
        self._state = _ServerState.RECEIVE_CLIENT_FINAL_MESSAGE
        return server_first.to_bytes()

    def _receive_client_final(self, response: bytes) -> bytes:
        assert self._client_first and self._server_first and self._credential
        client_final = self._parse(ClientFinalMessage, response)
        if client_final.nonce != self._server_first.nonce:
            self._reject("Invalid client nonce in the final client message.")
        signed = auth_message(self._client_first, self._server_first, client_final)
        credential = self._credential
        if not self._scram.verify_client_proof(credential.stored_key, signed, client_final.proof):
            self._reject("Invalid client credentials")
        signature = self._scram.server_signature(credential.server_key, signed)
        self._clear()
        self._state = _ServerState.COMPLETE
        return ServerFinalMessage(server_signature=signature).to_bytes()

    def _parse(self, message_type: type[_ClientMessage], response: bytes) -> _ClientMessage:
        try:
            return message_type.parse(response)
        except ScramMessageError as exc:
            self._reject(str(exc))

    def _reject(self, reason: str, cause: BaseException | None = None) -> NoReturn:
        failure = ScramFailure(reason)
        failure.__cause__ = cause
        raise InvalidCredentialsError(self.mechanism) from failure

    def _clear(self) -> None:
        self._client_first = self._server_first = None
        self._credential = None


class _ClientState(enum.Enum):
    SEND_CLIENT_FIRST_MESSAGE = enum.auto()
    RECEIVE_SERVER_FIRST_MESSAGE = enum.auto()
    RECEIVE_SERVER_FINAL_MESSAGE = enum.auto()
    COMPLETE = enum.auto()
    FAILED = enum.auto()


class ScramSaslClient:
    """The client side of one SCRAM authentication (``SaslClient``), as Kafka's client.

    ``nonce`` is for tests that replay a known exchange; a fresh one is made otherwise.
    """

    mechanism: str

    def __init__(
        self,
        mechanism: ScramMechanism,
        username: str,
        password: str,
        *,
        extensions: Mapping[str, str] | None = None,
        nonce: str | None = None,
    ) -> None:
        self.mechanism = mechanism.mechanism_name
        self._scram = mechanism
        self._password = password
        self._client_first = ClientFirstMessage(
            sasl_name(username), nonce or secure_random_string(), extensions=dict(extensions or {})
        )
        self._state = _ClientState.SEND_CLIENT_FIRST_MESSAGE
        self._server_signature = b""

    def initial_response(self) -> bytes:
        if self._state is not _ClientState.SEND_CLIENT_FIRST_MESSAGE:
            raise RuntimeError(f"Unexpected challenge in Sasl client state {self._state.name}")
        self._state = _ClientState.RECEIVE_SERVER_FIRST_MESSAGE
        return self._client_first.to_bytes()

    def evaluate(self, challenge: bytes) -> bytes:
        try:
            if self._state is _ClientState.RECEIVE_SERVER_FIRST_MESSAGE:
                return self._receive_server_first(challenge)
            if self._state is _ClientState.RECEIVE_SERVER_FINAL_MESSAGE:
                return self._receive_server_final(challenge)
        except SaslAuthenticationError:
            self._state = _ClientState.FAILED
            raise
        raise RuntimeError(f"Unexpected challenge in Sasl client state {self._state.name}")

    @property
    def is_complete(self) -> bool:
        return self._state is _ClientState.COMPLETE

    def _receive_server_first(self, challenge: bytes) -> bytes:
        server_first = _parse_from_server(ServerFirstMessage, challenge)
        if not server_first.nonce.startswith(self._client_first.nonce):
            raise SaslAuthenticationError("Invalid server nonce: does not start with client nonce")
        if server_first.iterations < self._scram.min_iterations:
            raise SaslAuthenticationError(
                f"Requested iterations {server_first.iterations} is less than the minimum "
                f"{self._scram.min_iterations} for {self._scram.name}"
            )
        salted_password = self._scram.salted_password(
            self._password, server_first.salt, server_first.iterations
        )
        unsigned = ClientFinalMessage(GS2_HEADER_NO_BINDING, server_first.nonce, proof=b"")
        signed = auth_message(self._client_first, server_first, unsigned)
        self._server_signature = self._scram.server_signature(
            self._scram.server_key(salted_password), signed
        )
        self._state = _ClientState.RECEIVE_SERVER_FINAL_MESSAGE
        proof = self._scram.client_proof(salted_password, signed)
        return dataclasses.replace(unsigned, proof=proof).to_bytes()

    def _receive_server_final(self, challenge: bytes) -> bytes:
        server_final = _parse_from_server(ServerFinalMessage, challenge)
        if server_final.error is not None:
            raise SaslAuthenticationError(
                f"Sasl authentication using {self._scram.name} failed with error: "
                f"{server_final.error}"
            )
        assert server_final.server_signature is not None
        if not hmac.compare_digest(server_final.server_signature, self._server_signature):
            raise SaslAuthenticationError("Invalid server signature in server final message")
        self._state = _ClientState.COMPLETE
        return b""


def _parse_from_server(message_type: type[_ServerMessage], challenge: bytes) -> _ServerMessage:
    try:
        return message_type.parse(challenge)
    except ScramMessageError as exc:
        raise SaslAuthenticationError(str(exc)) from exc
