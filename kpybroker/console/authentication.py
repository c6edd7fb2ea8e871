"""Who is looking at the console: HTTP Basic authentication (RFC 7617) with the broker's users.

When the broker's listeners ask Kafka clients to authenticate (SASL), the console asks its
visitors too (``console.authentication``): every page, file and API call needs a user and
password, checked by the broker's own SASL servers (``check_password``). The user becomes
the principal of the console's Kafka calls for that request, so the ACLs decide what it
sees and does, as for a Kafka client of that user.

A failed attempt is logged once at INFO and answered after
``connection.failed.authentication.delay.ms``, as Kafka answers a failed SASL
authentication; the wait is a sleep on the event loop, which blocks nothing else.
A request without credentials is the browser's first, not a failure: it is answered
401 at once, which makes the browser ask for them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from aiohttp import BasicAuth, hdrs, web

from kpybroker.security.principal import ANONYMOUS, KafkaPrincipal
from kpybroker.security.sasl.mechanism import SaslAuthenticationError

log = logging.getLogger(__name__)

REALM = "kpybroker"
CHALLENGE = {hdrs.WWW_AUTHENTICATE: f'Basic realm="{REALM}"'}
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
PRINCIPAL: web.RequestKey[KafkaPrincipal] = web.RequestKey("principal", KafkaPrincipal)

#: ``(username, password) -> authorization id``; ``SaslAuthenticationError`` if refused.
PasswordCheck = Callable[[str, str], Awaitable[str]]


@dataclass(frozen=True)
class BasicAuthentication:
    """The console's users, and how long a failed attempt waits for its answer."""

    check: PasswordCheck
    failure_delay_s: float

    def middleware(self) -> Callable:
        @web.middleware
        async def authenticated(
            request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
        ) -> web.StreamResponse:
            header = request.headers.get(hdrs.AUTHORIZATION)
            if header is None:
                return _unauthorized()
            try:
                credentials = BasicAuth.decode(header)
                user = await self.check(credentials.login, credentials.password)
            except (ValueError, SaslAuthenticationError) as exc:
                log.info("Failed authentication with %s (console: %s)", request.remote, exc)
                await asyncio.sleep(self.failure_delay_s)
                return _unauthorized()
            request[PRINCIPAL] = KafkaPrincipal.user(user)
            return await handler(request)

        return authenticated


def principal_of(request: web.Request) -> KafkaPrincipal:
    """The request's authenticated user; ``User:ANONYMOUS`` when the console asks nobody."""
    return request.get(PRINCIPAL, ANONYMOUS)


def _unauthorized() -> web.Response:
    return web.Response(status=401, text="authentication required\n", headers=CHALLENGE)


def authentication_required(mode: str, protocols: Iterable[str]) -> bool:
    """``console.authentication``: ``auto`` asks for it when a listener uses SASL."""
    if mode == "auto":
        return any(protocol in SASL_PROTOCOLS for protocol in protocols)
    return mode == "required"
