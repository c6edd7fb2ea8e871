"""The console's settings, read once at start from the broker's config and security.

``console.listeners`` may be ``https://host:port``: the console then serves TLS with the
broker's own key store (``ssl.keystore.*``, overridden for the console alone by
``listener.name.console.ssl.*`` as a Kafka listener's are). It asks no client
certificate: its visitors authenticate with a password, which over plain ``http://``
would cross the network in clear.
"""

from __future__ import annotations

import dataclasses
import ssl
from collections.abc import Mapping
from dataclasses import dataclass

from kpybroker.config import BrokerConfig
from kpybroker.console.authentication import BasicAuthentication, authentication_required
from kpybroker.security.listener_security import ListenerSecurity
from kpybroker.security.sasl.password_check import check_password, password_mechanisms
from kpybroker.security.sasl.scram_credentials import CredentialLookup
from kpybroker.security.ssl_context import SslSettings, server_context
from kpybroker.server.http_listener import is_https

#: The listener name of the console's ``listener.name.<name>.ssl.*`` overrides.
CONSOLE_LISTENER = "console"


@dataclass(frozen=True)
class ConsoleSettings:
    url: str
    admin_enabled: bool
    #: None: the console asks nobody, and its requests act as ``User:ANONYMOUS``.
    authentication: BasicAuthentication | None = None
    #: For an ``https://`` address.
    tls: ssl.SSLContext | None = None

    @classmethod
    def from_config(
        cls,
        config: BrokerConfig,
        listeners: Mapping[str, ListenerSecurity],
        scram_credentials: CredentialLookup,
    ) -> ConsoleSettings:
        url = config.get_str("console.listeners") or ""
        return cls(
            url=url,
            admin_enabled=bool(config.get("console.admin.enable")),
            authentication=_authentication(config, listeners, scram_credentials),
            tls=_tls(config) if is_https(url) else None,
        )


def _authentication(
    config: BrokerConfig,
    listeners: Mapping[str, ListenerSecurity],
    scram_credentials: CredentialLookup,
) -> BasicAuthentication | None:
    protocols = [security.protocol for security in listeners.values()]
    if not authentication_required(config.get_str("console.authentication") or "", protocols):
        return None
    mechanisms = password_mechanisms(listeners, scram_credentials)
    delay_ms = config.get_int("connection.failed.authentication.delay.ms")
    return BasicAuthentication(
        lambda user, password: check_password(mechanisms, user, password), delay_ms / 1000
    )


def _tls(config: BrokerConfig) -> ssl.SSLContext:
    settings = SslSettings.from_config(config.listener_getter(CONSOLE_LISTENER))
    return server_context(dataclasses.replace(settings, client_auth="none"))
