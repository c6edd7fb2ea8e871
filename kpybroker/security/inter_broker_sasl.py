"""The SASL client a broker authenticates to its peers with: the mechanism
``sasl.mechanism.inter.broker.protocol``, logged in with the ``username`` and ``password``
(or OAUTHBEARER's unsecured login options) of the inter-broker listener's JAAS entry for it.

Imported by ``client_security`` only when the inter-broker listener uses SASL.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from kpybroker.config import BrokerConfig, ConfigError, Password
from kpybroker.security.sasl.jaas import parse_login_module
from kpybroker.security.sasl.mechanism import SaslClient
from kpybroker.security.sasl.oauthbearer import MECHANISM as OAUTHBEARER
from kpybroker.security.sasl.oauthbearer import OAuthBearerSaslClient
from kpybroker.security.sasl.plain import PLAIN_MECHANISM, PlainSaslClient
from kpybroker.security.sasl.scram import ScramSaslClient
from kpybroker.security.sasl.scram_credentials import ScramMechanism
from kpybroker.security.sasl.unsecured_jws import unsecured_login_extensions, unsecured_login_token


def inter_broker_sasl_client(config: BrokerConfig, listener: str) -> Callable[[], SaslClient]:
    """A new SASL client per connection to a peer on ``listener``; ``ConfigError`` where
    Kafka would not start."""
    mechanism = config.get_str("sasl.mechanism.inter.broker.protocol") or ""
    return _sasl_client(mechanism, _login_options(config, listener, mechanism))


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
