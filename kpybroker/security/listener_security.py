"""What a listener demands of its clients: TLS, SASL mechanisms, and how a principal is made.

Kafka names four security protocols (``listener.security.protocol.map``):
PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL. A :class:`ListenerSecurity` is one
listener's resolved form of that, built once at start (:func:`listener_security`)
from the broker config with the listener's ``listener.name.<name>.`` overrides
applied, as Kafka's ``ChannelBuilders`` does; the network layer asks it for the
TLS context, the principal of a client certificate, and the SASL settings, and
knows nothing of config keys.

SASL mechanisms, each configured by the listener's JAAS entry for it
(``listener.name.<listener>.<mechanism>.sasl.jaas.config``, the only place a
Kafka broker reads it from when there is no JAAS file):

- PLAIN: the users are the ``user_<name>="<password>"`` options of the entry;
- SCRAM-SHA-256, SCRAM-SHA-512: the users' salted credentials in the metadata
  store (``kafka-configs.sh --alter --add-config 'SCRAM-SHA-256=[...]'``);
- OAUTHBEARER: Kafka's unsecured validator, or, with Kafka's
  ``OAuthBearerValidatorCallbackHandler`` as the listener's
  ``oauthbearer.sasl.server.callback.handler.class``, signed tokens checked
  against ``sasl.oauthbearer.jwks.endpoint.url``.

GSSAPI (Kerberos) is not offered: a listener that enables it does not start.

The TLS and SASL parts are built by ``listener_tls`` and ``listener_sasl``,
imported only when a listener uses them: their key-store, JAAS and mechanism modules
would otherwise cost every broker's start-up about 10 ms.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kpybroker.config import BrokerConfig, Listener
from kpybroker.security.principal import ANONYMOUS, KafkaPrincipal

if TYPE_CHECKING:
    from kpybroker.security.sasl.jwks import JwksTokenValidator
    from kpybroker.security.sasl.sasl_settings import SaslSettings
    from kpybroker.security.sasl.scram_credentials import CredentialLookup


def _anonymous(certificate: bytes | None) -> KafkaPrincipal:
    return ANONYMOUS


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    """One listener's security: its protocol and what that protocol needs."""

    protocol: str
    #: The server-side TLS context (SSL and SASL_SSL listeners).
    tls: ssl.SSLContext | None = None
    #: The principal of a TLS client from its certificate (DER, or None without one).
    certificate_principal: Callable[[bytes | None], KafkaPrincipal] = _anonymous
    #: SASL_PLAINTEXT and SASL_SSL listeners.
    sasl: SaslSettings | None = None
    #: ``connection.failed.authentication.delay.ms``.
    failed_authentication_delay_ms: int = 100
    #: OAuth validators fetching keys in the background: started and closed with the broker.
    validators: tuple[JwksTokenValidator, ...] = ()

    async def start(self) -> None:
        for validator in self.validators:
            await validator.start()

    async def close(self) -> None:
        for validator in self.validators:
            await validator.close()


PLAINTEXT = ListenerSecurity("PLAINTEXT")


def listener_security(
    config: BrokerConfig, listener: Listener, scram_credentials: CredentialLookup
) -> ListenerSecurity:
    """The security of ``listener`` as ``config`` sets it; ``ConfigError`` as Kafka refuses
    to start. ``scram_credentials`` looks a SCRAM user's credential up."""
    protocol = listener.security_protocol
    tls: ssl.SSLContext | None = None
    certificate_principal = _anonymous
    if protocol in ("SSL", "SASL_SSL"):
        from kpybroker.security.listener_tls import listener_tls

        tls, certificate_principal = listener_tls(config, listener)
    sasl: SaslSettings | None = None
    validators: tuple[JwksTokenValidator, ...] = ()
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        from kpybroker.security.listener_sasl import listener_sasl

        sasl, validators = listener_sasl(config, listener, scram_credentials)
    delay = config.listener_value(listener.name, "connection.failed.authentication.delay.ms")
    assert isinstance(delay, int)
    return ListenerSecurity(protocol, tls, certificate_principal, sasl, delay, validators)
