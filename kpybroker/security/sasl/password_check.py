"""A username and password checked by the broker's own SASL servers, in process.

The web console takes HTTP Basic credentials (RFC 7617), and its users are the broker's:
the SCRAM users stored in the metadata (``kafka-configs --add-config 'SCRAM-SHA-256=...'``)
and the PLAIN users of the SASL listeners' JAAS configs (``user_<name>="<password>"``).
Rather than a second copy of those checks, the password goes through the very servers a
Kafka client's SASL exchange goes through, by the matching client run in process:
PLAIN's server compares it with the listener's JAAS password in constant time; for SCRAM
the client derives SaltedPassword (PBKDF2), ClientKey and the proof, and the server
verifies the proof against the stored key (H(ClientKey) = StoredKey) in constant time.
So the users, the iteration minimum and the failure reasons are the listeners' own.

PBKDF2 is thousands of HMACs (a few milliseconds): it runs in a worker thread, off the
event loop the Kafka listeners share.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from kpybroker.security.listener_security import ListenerSecurity
from kpybroker.security.sasl.mechanism import SaslAuthenticationError, SaslClient, SaslServer
from kpybroker.security.sasl.plain import PLAIN_MECHANISM, PlainSaslClient
from kpybroker.security.sasl.scram import ScramSaslClient, ScramSaslServer
from kpybroker.security.sasl.scram_credentials import CredentialLookup, ScramMechanism


class PasswordRejected(SaslAuthenticationError):
    """No mechanism accepted the password; the message says why each refused, for the log."""


@dataclass(frozen=True)
class PasswordMechanism:
    """A mechanism that checks passwords: its SASL name, its server's factory, and where
    its users are, for the log."""

    name: str
    new_server: Callable[[], SaslServer]
    users: str

    def new_client(self, username: str, password: str) -> SaslClient:
        scram = ScramMechanism.for_mechanism_name(self.name)
        if scram is not None:
            return ScramSaslClient(scram, username, password)
        return PlainSaslClient(username, password)


def password_mechanisms(
    listeners: Mapping[str, ListenerSecurity], scram_credentials: CredentialLookup
) -> tuple[PasswordMechanism, ...]:
    """SCRAM-SHA-256 and SCRAM-SHA-512 over the stored credentials, then PLAIN with the JAAS
    users of each SASL listener (by name) that enables it."""
    scram = tuple(
        PasswordMechanism(
            mechanism.mechanism_name,
            lambda mechanism=mechanism: ScramSaslServer(mechanism, scram_credentials),
            "stored credentials",
        )
        for mechanism in ScramMechanism
    )
    plain = tuple(
        PasswordMechanism(
            PLAIN_MECHANISM,
            lambda sasl=security.sasl: sasl.new_server(PLAIN_MECHANISM),
            f"listener {name}",
        )
        for name, security in listeners.items()
        if security.sasl is not None and PLAIN_MECHANISM in security.sasl.mechanisms
    )
    return scram + plain


async def check_password(
    mechanisms: Sequence[PasswordMechanism], username: str, password: str
) -> str:
    """The authorization id of the first mechanism that accepts the password.

    Raises ``PasswordRejected`` naming each mechanism's reason when none does.
    """
    reasons = []
    for mechanism in mechanisms:
        try:
            return await _exchange(mechanism, username, password)
        except SaslAuthenticationError as exc:
            reasons.append(f"{mechanism.name} ({mechanism.users}): {_reason(exc)}")
    raise PasswordRejected("; ".join(reasons) or "no mechanism checks passwords")


async def _exchange(mechanism: PasswordMechanism, username: str, password: str) -> str:
    """One whole SASL exchange between a client and a server of ``mechanism``."""
    server = mechanism.new_server()
    client = mechanism.new_client(username, password)
    token = client.initial_response()
    while True:
        challenge = await server.evaluate(token)
        if server.is_complete:
            return server.authorization_id
        token = await asyncio.to_thread(client.evaluate, challenge)


def _reason(exc: SaslAuthenticationError) -> str:
    """What the server keeps for its log (an ``InvalidCredentialsError``'s cause), else the
    message it gives the client."""
    cause = exc.__cause__
    return str(cause) if cause is not None else str(exc)
