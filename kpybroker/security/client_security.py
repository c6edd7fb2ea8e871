"""How this broker proves itself to its peers: the client side of a listener's security.

Brokers reach one another on the inter-broker listener, and speak its security
protocol as any client would: TLS with the listener's key store as the client
certificate (the peer may require one) and its trust store, the host name
checked when ``ssl.endpoint.identification.algorithm`` is ``https``; then SASL
with ``sasl.mechanism.inter.broker.protocol`` and the credentials of the
listener's JAAS configuration for that mechanism (``username`` and
``password``), as Kafka's brokers do.

The TLS and SASL modules are imported only when the inter-broker listener uses them.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kpybroker.config import BrokerConfig

if TYPE_CHECKING:
    from kpybroker.security.sasl.mechanism import SaslClient


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """What a connection to a peer does before its first request."""

    #: TLS context for the connection (it decides whether the host name is checked).
    tls: ssl.SSLContext | None = None
    #: A new SASL client for each connection; None: no SASL.
    new_sasl_client: Callable[[], SaslClient] | None = None


PLAINTEXT_CLIENT = ClientSecurity()


def inter_broker_security(config: BrokerConfig) -> ClientSecurity:
    """What this broker's connections to its peers do, from the inter-broker listener's
    settings; ``ConfigError`` where Kafka would not start."""
    name = config.inter_broker_listener_name()
    protocol = config.security_protocol_map().get(name, name)
    tls = None
    if protocol in ("SSL", "SASL_SSL"):
        from kpybroker.security.ssl_context import SslSettings, client_context

        tls = client_context(SslSettings.from_config(config.listener_getter(name)))
    new_sasl_client = None
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        from kpybroker.security.inter_broker_sasl import inter_broker_sasl_client

        new_sasl_client = inter_broker_sasl_client(config, name)
    return ClientSecurity(tls, new_sasl_client)
