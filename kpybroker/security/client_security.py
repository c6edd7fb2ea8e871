"""How this broker proves itself to its peers: the client side of a listener's security.

Brokers reach one another on the inter-broker listener, and speak its security
protocol as any client would: TLS with the listener's key store as the client
certificate (the peer may require one) and its trust store, the host name
checked when ``ssl.endpoint.identification.algorithm`` is ``https``; then SASL
with ``sasl.mechanism.inter.broker.protocol`` and the credentials of the
listener's JAAS configuration for that mechanism (``username`` and
``password``), as Kafka's brokers do.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kpybroker.config import BrokerConfig, ConfigError, Password
from kpybroker.security.sasl.jaas import parse_login_module
from kpybroker.security.sasl.mechanism import SaslClient
from kpybroker.security.sasl.oauthbearer import MECHANISM as OAUTHBEARER
from kpybroker.security.sasl.oauthbearer import OAuthBearerSaslClient
from kpybroker.security.sasl.plain import PLAIN_MECHANISM, PlainSaslClient
from kpybroker.security.sasl.scram import ScramSaslClient
from kpybroker.security.sasl.scram_credentials import ScramMechanism
from kpybroker.security.sasl.unsecured_jws import unsecured_login_extensions, unsecured_login_token
from kpybroker.security.ssl_context import SslSettings, client_context


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
        tls = client_context(SslSettings.from_config(config.listener_getter(name)))
    new_sasl_client = None
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        mechanism = config.get_str("sasl.mechanism.inter.broker.protocol") or ""
        new_sasl_client = _sasl_client(mechanism, _login_options(config, name, mechanism))
    return ClientSecurity(tls, new_sasl_client)


def _login_options(config: BrokerConfig, listener: str, mechanism: str) -> Mapping[str, str]:
    """The options of the listener's JAAS entry for ``mechanism``: the broker's own login."""
    key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    value = config.listener_value(listener, "sasl.jaas.config", mechanism)
    if not isinstance(value, Password):
        raise ConfigError(
            key,
            f"The inter-broker listener {listener} authenticates brokers with "
            f"{mechanism}, which needs {key} with the broker's own credentials",
        )
    try:
        return parse_login_module(value.value).options
    except ValueError as exc:
        raise ConfigError(key, str(exc)) from None


def _sasl_client(mechanism: str, options: Mapping[str, str]) -> Callable[[], SaslClient]:
    scram = ScramMechanism.for_mechanism_name(mechanism)
    if mechanism == PLAIN_MECHANISM or scram is not None:
        username, password = options.get("username"), options.get("password")
        if username is None or password is None:
            raise ConfigError(
                "sasl.mechanism.inter.broker.protocol",
                f"the broker's {mechanism} login needs username and password options",
            )
        if scram is not None:
            return lambda: ScramSaslClient(scram, username, password)
        return lambda: PlainSaslClient(username, password)
    if mechanism == OAUTHBEARER:
        extensions = unsecured_login_extensions(options)

        def oauth_client() -> SaslClient:
            token = unsecured_login_token(options, time.time_ns() // 1_000_000)
            if token is None:
                raise ConfigError(
                    "sasl.mechanism.inter.broker.protocol",
                    "the broker's OAUTHBEARER login needs unsecuredLogin options",
                )
            return OAuthBearerSaslClient(token, extensions)

        oauth_client()  # refuse unusable options at start
        return oauth_client
    raise ConfigError(
        "sasl.mechanism.inter.broker.protocol",
        f"SASL mechanism {mechanism} is not supported by kpybroker between brokers",
    )
