"""The TLS side of an SSL or SASL_SSL listener: its server context, and the principal a
client's certificate names (``ssl.principal.mapping.rules``).

Imported by ``listener_security`` only for listeners that use TLS.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable

from kpybroker.config import BrokerConfig, Listener
from kpybroker.security.principal import KafkaPrincipal
from kpybroker.security.ssl_context import SslSettings, server_context
from kpybroker.security.ssl_principal import SslPrincipalMapper, principal_name


def listener_tls(
    config: BrokerConfig, listener: Listener
) -> tuple[ssl.SSLContext, Callable[[bytes | None], KafkaPrincipal]]:
    """The listener's server context, and how a client's certificate (DER, or None) names
    its principal."""
    settings = SslSettings.from_config(_ssl_getter(config, listener))
    mapper = SslPrincipalMapper(settings.principal_mapping_rules)
    return server_context(settings), _certificate_principal(mapper)


def _ssl_getter(config: BrokerConfig, listener: Listener) -> Callable[[str], object]:
    """The listener's ``ssl.*`` settings. On SASL_SSL Kafka asks for client certificates only
    when the listener itself says so: a broker-wide ``ssl.client.auth`` is for SSL ones."""
    prefixed = f"listener.name.{listener.name.lower()}.ssl.client.auth"

    def get(name: str) -> object:
        if (
            name == "ssl.client.auth"
            and listener.security_protocol == "SASL_SSL"
            and prefixed not in config.originals
        ):
            return "none"
        return config.listener_value(listener.name, name)

    return get


def _certificate_principal(mapper: SslPrincipalMapper) -> Callable[[bytes | None], KafkaPrincipal]:
    def principal(certificate: bytes | None) -> KafkaPrincipal:
        return KafkaPrincipal.user(principal_name(certificate, mapper))

    return principal
