"""SASL/PLAIN (RFC 4616): Kafka's ``PlainSaslServer`` and ``PlainServerCallbackHandler``.

The client sends ``authzid NUL authcid NUL password`` in one message. Kafka's
own user store for PLAIN is the listener's JAAS config: each option
``user_<name>="<password>"`` of the ``PlainLoginModule`` entry is a user
(``plain_users``). Every failure here is one Kafka reports to the client in
its own words (they are ``SaslAuthenticationException``s there), and they do
not tell an unknown user from a wrong password.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Iterable, Mapping

from kpybroker.security.sasl.jaas import JaasEntry
from kpybroker.security.sasl.mechanism import SaslAuthenticationError

PLAIN_MECHANISM = "PLAIN"
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
USER_OPTION_PREFIX = "user_"

#: ``(username, password) -> accepted``: a replacement for the JAAS user list, as Kafka's
#: ``sasl.server.callback.handler.class`` is.
PasswordCheck = Callable[[str, str], bool]


def plain_users(entries: Iterable[JaasEntry]) -> dict[str, str]:
    """Username -> password from the ``user_<name>`` options of the PlainLoginModule
    entries; where several define a user, the first wins (``configEntryOption``)."""
    users: dict[str, str] = {}
    for entry in entries:
        if entry.login_module != PLAIN_LOGIN_MODULE:
            continue
        for key, value in entry.options.items():
            if key.startswith(USER_OPTION_PREFIX):
                users.setdefault(key.removeprefix(USER_OPTION_PREFIX), value)
    return users


class PlainSaslServer:
    """The server side of one PLAIN authentication (``SaslServer``).

    ``users`` is either the username -> password mapping (``plain_users``),
    compared in constant time, or a ``PasswordCheck``.
    """

    mechanism = PLAIN_MECHANISM

    def __init__(self, users: Mapping[str, str] | PasswordCheck) -> None:
        self._check = users if callable(users) else _JaasPasswords(users)
        self._authorization_id: str | None = None

    async def evaluate(self, response: bytes) -> bytes:
        authorization_id, username, password = _split(response.decode("utf-8", "replace"))
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        try:
            authenticated = self._check(username, password)
        except Exception as exc:  # Kafka's answer whatever broke the check
            raise SaslAuthenticationError(
                "Authentication failed: credentials for user could not be verified"
            ) from exc
        if not authenticated:
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authorization_id and authorization_id != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        self._authorization_id = username
        return b""

    @property
    def is_complete(self) -> bool:
        return self._authorization_id is not None

    @property
    def authorization_id(self) -> str:
        if self._authorization_id is None:
            raise RuntimeError("Authentication exchange has not completed")
        return self._authorization_id

    @property
    def credential_expiry_ms(self) -> int | None:
        return None


class PlainSaslClient:
    """The client side (``SaslClient``): the whole exchange is the initial response.

    As the JDK's PLAIN client that Kafka uses, it sends no authorization id unless given
    one, and is complete once the response is made.
    """

    mechanism = PLAIN_MECHANISM

    def __init__(self, username: str, password: str, authorization_id: str = "") -> None:
        self._message = f"{authorization_id}\0{username}\0{password}".encode()
        self._sent = False

    def initial_response(self) -> bytes:
        self._sent = True
        return self._message

    def evaluate(self, challenge: bytes) -> bytes:
        raise RuntimeError("PLAIN authentication already completed")

    @property
    def is_complete(self) -> bool:
        return self._sent


class _JaasPasswords:
    """``PlainServerCallbackHandler.authenticate`` over a username -> password mapping."""

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users

    def __call__(self, username: str, password: str) -> bool:
        expected = self._users.get(username)
        return expected is not None and hmac.compare_digest(password.encode(), expected.encode())


def _split(message: str) -> tuple[str, str, str]:
    """The three NUL-separated tokens; Kafka counts up to four to report how many it saw."""
    tokens = message.split("\0", 3)
    if len(tokens) != 3:
        raise SaslAuthenticationError(
            f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}"
        )
    return tokens[0], tokens[1], tokens[2]
