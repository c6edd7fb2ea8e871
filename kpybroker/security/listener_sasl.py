"""The SASL side of a SASL_PLAINTEXT or SASL_SSL listener: its enabled mechanisms, each
configured by the listener's JAAS entry for it, as ``listener_security`` describes.

Imported by ``listener_security`` only for listeners that use SASL.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from kpybroker.config import BrokerConfig, ConfigError, Listener, Password
from kpybroker.security.sasl.jaas import JaasEntry, parse_login_module
from kpybroker.security.sasl.mechanism import SaslServer
from kpybroker.security.sasl.oauthbearer import MECHANISM as OAUTHBEARER
from kpybroker.security.sasl.oauthbearer import OAuthBearerSaslServer, TokenValidator
from kpybroker.security.sasl.plain import PLAIN_MECHANISM, PlainSaslServer, plain_users
from kpybroker.security.sasl.sasl_settings import SaslSettings
from kpybroker.security.sasl.scram import ScramSaslServer
from kpybroker.security.sasl.scram_credentials import CredentialLookup, ScramMechanism
from kpybroker.security.sasl.unsecured_jws import UnsecuredJwsValidator

if TYPE_CHECKING:
    from kpybroker.security.sasl.jwks import JwksTokenValidator

#: Kafka's class for signed OAuth tokens (``sasl.server.callback.handler.class``).
JWKS_VALIDATOR_CLASS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
)


def listener_sasl(
    config: BrokerConfig, listener: Listener, scram_credentials: CredentialLookup
) -> tuple[SaslSettings, tuple[JwksTokenValidator, ...]]:
    """The listener's SASL settings, with a server factory per enabled mechanism, and the
    OAuth validators that fetch keys (started and closed with the broker); ``ConfigError``
    as Kafka refuses to start."""
    mechanisms = config.listener_value(listener.name, "sasl.enabled.mechanisms") or ()
    assert isinstance(mechanisms, tuple)
    factories: dict[str, Callable[[], SaslServer]] = {}
    validators: list[JwksTokenValidator] = []
    for mechanism in mechanisms:
        entry = _jaas_entry(config, listener, mechanism)
        scram = ScramMechanism.for_mechanism_name(mechanism)
        if mechanism == PLAIN_MECHANISM:
            users = plain_users([entry])
            factories[mechanism] = lambda users=users: PlainSaslServer(users)
        elif scram is not None:
            factories[mechanism] = lambda scram=scram: ScramSaslServer(scram, scram_credentials)
        elif mechanism == OAUTHBEARER:
            validator: TokenValidator
            if _validates_with_jwks(config, listener):
                validator = _jwks_validator(config, listener)
                validators.append(validator)
            else:
                validator = UnsecuredJwsValidator(entry.options)
            factories[mechanism] = lambda validator=validator: OAuthBearerSaslServer(validator)
        else:
            raise ConfigError(
                "sasl.enabled.mechanisms",
                f"SASL mechanism {mechanism} of listener {listener.name} is not supported by "
                f"kpybroker (it offers {PLAIN_MECHANISM}, SCRAM-SHA-256, SCRAM-SHA-512 and "
                f"{OAUTHBEARER})",
            )
        _refuse_callback_handler(config, listener, mechanism)
    max_receive = config.listener_value(listener.name, "sasl.server.max.receive.size")
    assert isinstance(max_receive, int)
    settings = SaslSettings(
        mechanisms=java_hash_map_order(mechanisms),
        new_server=lambda mechanism: factories[mechanism](),
        max_receive_size=max_receive,
        reauth_ms=lambda mechanism: _reauth_ms(config, listener, mechanism),
    )
    return settings, tuple(validators)


def java_hash_map_order(keys: Iterable[str]) -> tuple[str, ...]:
    """The order a Java ``HashMap`` of these keys iterates in: Kafka announces a listener's
    mechanisms from one (``SaslHandshake``'s list), so clients see them in that order.

    A key's bucket is its ``String.hashCode``, spread as ``HashMap.hash`` does, modulo the
    table size (16, doubled while more than three quarters full); keys of one bucket keep
    the order they were put in.
    """
    distinct = list(dict.fromkeys(keys))
    capacity = 16
    while len(distinct) > capacity * 3 // 4:
        capacity *= 2

    def bucket(key: str) -> int:
        utf16 = key.encode("utf-16-be")
        code = 0
        for index in range(0, len(utf16), 2):  # over UTF-16 code units, as Java's strings
            code = (31 * code + int.from_bytes(utf16[index : index + 2], "big")) & 0xFFFFFFFF
        return (code ^ (code >> 16)) & (capacity - 1)

    return tuple(sorted(distinct, key=lambda key: bucket(key)))


def _jaas_entry(config: BrokerConfig, listener: Listener, mechanism: str) -> JaasEntry:
    """The listener's JAAS entry for ``mechanism``, with Kafka's error when there is none."""
    key = f"listener.name.{listener.name.lower()}.{mechanism.lower()}.sasl.jaas.config"
    value = config.listener_value(listener.name, "sasl.jaas.config", mechanism)
    if value is None:
        raise ConfigError(
            key,
            "Could not find a 'KafkaServer' or "
            f"'{listener.name.lower()}.KafkaServer' entry in the JAAS configuration. System "
            "property 'java.security.auth.login.config' is not set",
        )
    assert isinstance(value, Password)
    try:
        return parse_login_module(value.value)
    except ValueError as exc:
        raise ConfigError(key, str(exc)) from None


def _mechanism_value(config: BrokerConfig, listener: Listener, mechanism: str, name: str) -> object:
    """A setting as Kafka reads it per mechanism: ``listener.name.<l>.<mechanism>.<name>``,
    then ``listener.name.<l>.<name>``, then ``<name>``."""
    value = config.listener_value(listener.name, name, mechanism)
    return config.listener_value(listener.name, name) if value is None else value


def _reauth_ms(config: BrokerConfig, listener: Listener, mechanism: str) -> int:
    value = _mechanism_value(config, listener, mechanism, "connections.max.reauth.ms")
    assert isinstance(value, int)
    return value


def _refuse_callback_handler(config: BrokerConfig, listener: Listener, mechanism: str) -> None:
    """A Java callback handler class cannot run here; only Kafka's JWKS validator is known."""
    handler = _mechanism_value(config, listener, mechanism, "sasl.server.callback.handler.class")
    if handler is not None and not (mechanism == OAUTHBEARER and handler == JWKS_VALIDATOR_CLASS):
        raise ConfigError(
            "sasl.server.callback.handler.class",
            f"Java class {handler} cannot be loaded by kpybroker (listener {listener.name}, "
            f"mechanism {mechanism})",
        )


def _validates_with_jwks(config: BrokerConfig, listener: Listener) -> bool:
    """Kafka's JWKS validator is configured; otherwise its unsecured one for development."""
    handler = _mechanism_value(config, listener, OAUTHBEARER, "sasl.server.callback.handler.class")
    return handler == JWKS_VALIDATOR_CLASS


def _jwks_validator(config: BrokerConfig, listener: Listener) -> JwksTokenValidator:
    # Imported here: PyJWT and the HTTP client load only on brokers that fetch keys.
    from kpybroker.security.sasl.jwks import JwksSettings, JwksTokenValidator

    settings = JwksSettings.from_config(
        lambda name: _mechanism_value(config, listener, OAUTHBEARER, name)
    )
    return JwksTokenValidator(settings)
