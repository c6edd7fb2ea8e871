"""What every SASL mechanism offers the authenticator: one exchange of bytes at a time.

A server mechanism is made for one authentication attempt on one connection
(as Java's ``SaslServer``). The authenticator hands it each token the client
sends and returns what it answers, until ``is_complete``; a failed check raises
``SaslAuthenticationError`` with the message Kafka puts in its
SASL_AUTHENTICATION_FAILED answer. Mechanisms do no I/O of their own, except
that ``evaluate`` is a coroutine so that one may wait for key material (a JSON
web key set being fetched) without blocking the event loop.

Client mechanisms are the other side, used by a broker authenticating to its
peers (and by tests): ``initial_response`` and then ``evaluate`` on each
challenge, until ``is_complete``.
"""

from __future__ import annotations

from typing import Protocol


class SaslAuthenticationError(Exception):
    """Authentication failed; ``str(exc)`` is the message the client is given."""


def invalid_credentials_message(mechanism: str, *, reauthentication: bool = False) -> str:
    """What Kafka's authenticator tells a client whose mechanism failed for a reason it keeps
    to itself (a Java ``SaslException``: an unknown user, a wrong proof, a malformed message),
    so that the answer does not tell which."""
    phase = "re-authentication" if reauthentication else "authentication"
    return (
        f"Authentication failed during {phase} due to invalid credentials "
        f"with SASL mechanism {mechanism}"
    )


class InvalidCredentialsError(SaslAuthenticationError):
    """A failure whose reason the client is not told: its message is
    ``invalid_credentials_message``; the reason, for the log, is the exception's cause."""

    def __init__(self, mechanism: str) -> None:
        super().__init__(invalid_credentials_message(mechanism))
        self.mechanism = mechanism


class SaslServer(Protocol):
    """The server side of one authentication attempt."""

    #: The mechanism's name as clients send it in SaslHandshake, e.g. "SCRAM-SHA-256".
    mechanism: str

    async def evaluate(self, response: bytes) -> bytes:
        """Take the client's next token; return the challenge to send back (may be empty).

        Raises ``SaslAuthenticationError`` when the client fails authentication.
        """
        ...

    @property
    def is_complete(self) -> bool:
        """The exchange has succeeded; ``authorization_id`` is then the principal's name."""
        ...

    @property
    def authorization_id(self) -> str: ...

    @property
    def credential_expiry_ms(self) -> int | None:
        """When the credential stops being valid (wall clock, ms), for KIP-368's session
        lifetime: an OAuth token's ``exp``; None for credentials that do not expire."""
        ...


class SaslClient(Protocol):
    """The client side of one authentication attempt."""

    mechanism: str

    def initial_response(self) -> bytes: ...

    def evaluate(self, challenge: bytes) -> bytes:
        """Take the server's challenge; return the next token. Raises
        ``SaslAuthenticationError`` when the server's answer does not check out."""
        ...

    @property
    def is_complete(self) -> bool: ...
