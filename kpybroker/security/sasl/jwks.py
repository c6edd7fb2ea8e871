"""Signed OAuth tokens checked against the identity provider's keys: Kafka's broker validator.

This is Kafka's ``OAuthBearerValidatorCallbackHandler`` with its ``BrokerJwtValidator``
(Kafka 4.4), which a listener uses when ``sasl.oauthbearer.jwks.endpoint.url`` is set. A
token passes when it is a JWS signed with a key from that JWKS (any algorithm but "none"),
it has ``exp`` and ``iat`` and has not expired, its ``nbf`` (if any) has come, allowing
``clock.skew.seconds`` either way, its ``aud`` names one of ``expected.audience`` and its
``iss`` is ``expected.issuer``, and the claim named by ``sub.claim.name`` is a non-blank
string: the principal. The ``scope.claim.name`` claim, a string (one scope, not split) or a
list, gives its scopes. Kafka 4.4 refuses to start without an expected audience and issuer
unless ``sasl.oauthbearer.allow.unverified.audience`` / ``.issuer`` say so, and so does this.

Every failure is answered ``{"status":"invalid_token"}``; the reason goes only to the log,
at warning, as in Kafka. PyJWT does the JOSE work; the claims are read the way Kafka reads
them after jose4j.
"""

from __future__ import annotations

import logging
import math
import os
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jwt

from kpybroker.config.core import ConfigError, java_trim
from kpybroker.config.setting_fields import broker_setting
from kpybroker.log.log_config import CONFIG_KEY
from kpybroker.security.sasl.jwks_keys import (
    KEY_TYPES,
    FileJwks,
    NoVerificationKeyError,
    RefreshingHttpsJwks,
)
from kpybroker.security.sasl.oauthbearer import OAuthBearerToken, TokenValidationError

log = logging.getLogger(__name__)

JWKS_ENDPOINT_URL = "sasl.oauthbearer.jwks.endpoint.url"
JWKS_ENDPOINT_REFRESH_MS = "sasl.oauthbearer.jwks.endpoint.refresh.ms"
JWKS_ENDPOINT_RETRY_BACKOFF_MS = "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms"
JWKS_ENDPOINT_RETRY_BACKOFF_MAX_MS = "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms"
EXPECTED_AUDIENCE = "sasl.oauthbearer.expected.audience"
EXPECTED_ISSUER = "sasl.oauthbearer.expected.issuer"
SCOPE_CLAIM_NAME = "sasl.oauthbearer.scope.claim.name"
SUB_CLAIM_NAME = "sasl.oauthbearer.sub.claim.name"
CLOCK_SKEW_SECONDS = "sasl.oauthbearer.clock.skew.seconds"
# Kafka 4.4's, not yet in the broker table.
ALLOW_UNVERIFIED_AUDIENCE = "sasl.oauthbearer.allow.unverified.audience"
ALLOW_UNVERIFIED_ISSUER = "sasl.oauthbearer.allow.unverified.issuer"


@dataclass(frozen=True, slots=True)
class JwksSettings:
    """The configs the validator reads, as the listener sees them (Kafka looks for
    ``listener.name.<listener>.oauthbearer.<config>`` first, then the plain config)."""

    jwks_endpoint_url: str | None = broker_setting(JWKS_ENDPOINT_URL)
    jwks_endpoint_refresh_ms: int = broker_setting(JWKS_ENDPOINT_REFRESH_MS)
    jwks_endpoint_retry_backoff_ms: int = broker_setting(JWKS_ENDPOINT_RETRY_BACKOFF_MS)
    jwks_endpoint_retry_backoff_max_ms: int = broker_setting(JWKS_ENDPOINT_RETRY_BACKOFF_MAX_MS)
    expected_audience: tuple[str, ...] = broker_setting(EXPECTED_AUDIENCE)
    expected_issuer: str | None = broker_setting(EXPECTED_ISSUER)
    scope_claim_name: str = broker_setting(SCOPE_CLAIM_NAME)
    sub_claim_name: str = broker_setting(SUB_CLAIM_NAME)
    clock_skew_seconds: int = broker_setting(CLOCK_SKEW_SECONDS)
    allow_unverified_audience: bool = field(
        default=False, metadata={CONFIG_KEY: ALLOW_UNVERIFIED_AUDIENCE}
    )
    allow_unverified_issuer: bool = field(
        default=False, metadata={CONFIG_KEY: ALLOW_UNVERIFIED_ISSUER}
    )

    @classmethod
    def from_config(cls, get: Callable[[str], object]) -> JwksSettings:
        """Each setting read with ``get(config name)``; None (unset) keeps the default."""
        values = {f.name: get(f.metadata[CONFIG_KEY]) for f in fields(cls)}
        return cls(**{name: value for name, value in values.items() if value is not None})


#: How Kafka's messages about the URL begin.
_URL_OPTION = f"The OAuth configuration option {JWKS_ENDPOINT_URL}"


def _required(name: str, value: str | None) -> str:
    if value is None or not java_trim(value):
        raise ConfigError(name, f"The OAuth configuration option {name} value is required")
    return java_trim(value)


def _unverified_error(
    name: str, claim: str, what: str, opt_out: str, accepting: str
) -> ConfigError:
    return ConfigError(
        name,
        f'The OAuth validator for the broker requires "{name}" to be configured so that the '
        f'token\'s {claim} claim can be verified, but it was not set. Set "{name}" to {what}, '
        f'or set "{opt_out}" to true to accept tokens regardless of {accepting}.',
    )


def _file_path(raw_path: str) -> Path:
    """Kafka's ``validateFileUrl``: the URL's raw (undecoded) path, a readable file."""
    path = Path(raw_path).absolute()
    if not path.exists():
        raise ConfigError(
            JWKS_ENDPOINT_URL, f"{_URL_OPTION} contains a file ({path}) that doesn't exist"
        )
    if not os.access(path, os.R_OK):
        raise ConfigError(
            JWKS_ENDPOINT_URL,
            f"{_URL_OPTION} contains a file ({path}) that doesn't have read permission",
        )
    if path.is_dir():
        raise ConfigError(
            JWKS_ENDPOINT_URL, f"{_URL_OPTION} references a directory ({path}), not a file"
        )
    return path


def _key_source(
    settings: JwksSettings, ssl_context: ssl.SSLContext | None
) -> FileJwks | RefreshingHttpsJwks:
    """Kafka's ``VerificationKeyResolverFactory``, its checks of the settings included."""
    url = _required(JWKS_ENDPOINT_URL, settings.jwks_endpoint_url)
    parts = urlsplit(url)
    if not parts.scheme:
        raise ConfigError(
            JWKS_ENDPOINT_URL,
            f"{_URL_OPTION} contains a URL ({url}) that is malformed: no protocol: {url}",
        )
    if parts.scheme not in ("http", "https", "file"):
        raise ConfigError(
            JWKS_ENDPOINT_URL,
            f"{_URL_OPTION} contains a URL ({url}) that contains an invalid protocol "
            f'({parts.scheme}); only "http", "https", and "file" protocol are supported',
        )
    if parts.scheme == "file":
        return FileJwks(_file_path(parts.path))
    refresh_ms = settings.jwks_endpoint_refresh_ms
    backoff_ms = settings.jwks_endpoint_retry_backoff_ms
    backoff_max_ms = settings.jwks_endpoint_retry_backoff_max_ms
    if refresh_ms < 0:
        raise ConfigError(
            JWKS_ENDPOINT_REFRESH_MS,
            f"The OAuth configuration option {JWKS_ENDPOINT_REFRESH_MS} value must be at least 0",
        )
    if refresh_ms == 0:
        raise ConfigError(
            JWKS_ENDPOINT_REFRESH_MS,
            "JWKS validation key refresh configuration value retryWaitMs value must be positive",
        )
    if backoff_ms < 0:
        raise ConfigError(
            JWKS_ENDPOINT_RETRY_BACKOFF_MS,
            f"retryBackoffMs value ({backoff_ms}) must be non-negative",
        )
    if backoff_max_ms < backoff_ms:
        raise ConfigError(
            JWKS_ENDPOINT_RETRY_BACKOFF_MAX_MS,
            f"retryBackoffMaxMs value ({backoff_max_ms}) is less than retryBackoffMs value "
            f"({backoff_ms})",
        )
    return RefreshingHttpsJwks(
        url,
        refresh_ms=refresh_ms,
        retry_backoff_ms=backoff_ms,
        retry_backoff_max_ms=backoff_max_ms,
        ssl_context=ssl_context,
    )


def _invalid(reason: object) -> TokenValidationError:
    return TokenValidationError(f"Could not validate the access token: {reason}")


def _cannot_extract(name: str) -> TokenValidationError:
    return TokenValidationError(f"Could not extract the '{name}' claim from the access token")


def _check_as_jose4j(claims: Mapping[str, Any]) -> None:
    """What jose4j checks beyond PyJWT: times are numbers and ``exp`` is not before ``iat`` or
    ``nbf``; ``iss`` is a string even when the issuer is not verified."""
    times = {name: claims.get(name) for name in ("exp", "nbf", "iat")}
    for name, value in times.items():
        if value is not None and (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
        ):
            raise _invalid(f"The value of the '{name}' claim is not the expected type")
    exp = int(claims["exp"])  # required: PyJWT saw to it
    for name, label in (("iat", "Issued At"), ("nbf", "Not Before")):
        value = times[name]
        if value is not None and exp < int(value):
            raise _invalid(
                f"The Expiration Time (exp={exp}) claim value cannot be before the {label} "
                f"({name}={int(value)}) claim value."
            )
    if not isinstance(claims.get("iss", ""), str):
        raise _invalid("The value of the 'iss' claim is not the expected type")


def _claim_string(name: str, value: object) -> str:
    """Kafka's ``ClaimValidationUtils.validateString``: present, not blank; trimmed."""
    if value is None:
        raise TokenValidationError(f"{name} value must be non-null")
    if not isinstance(value, str):  # Kafka fails with a ClassCastException
        raise _cannot_extract(name)
    if not value:
        raise TokenValidationError(f"{name} value must be non-empty")
    if not java_trim(value):
        raise TokenValidationError(f"{name} value must not contain only whitespace")
    return java_trim(value)


class JwksTokenValidator:
    """Checks signed tokens against the JWKS; ``start()`` before use, ``close()`` after.

    Construction checks the settings (``ConfigError``, Kafka's messages); ``start()`` reads or
    fetches the key set and raises ``JwksUnavailableError`` when it cannot, as Kafka then
    fails to start. ``ssl_context`` verifies an https endpoint (default: the system's trust
    store); Kafka builds its equivalent from the ``ssl.*`` options of the listener's JAAS
    config.
    """

    def __init__(
        self, settings: JwksSettings, *, ssl_context: ssl.SSLContext | None = None
    ) -> None:
        self._scope_claim_name = _required(SCOPE_CLAIM_NAME, settings.scope_claim_name)
        self._sub_claim_name = _required(SUB_CLAIM_NAME, settings.sub_claim_name)
        if not settings.expected_audience and not settings.allow_unverified_audience:
            raise _unverified_error(
                EXPECTED_AUDIENCE,
                'audience ("aud")',
                "the audience(s) that identify this cluster",
                ALLOW_UNVERIFIED_AUDIENCE,
                "their audience",
            )
        issuer = settings.expected_issuer
        self._issuer = java_trim(issuer) if issuer and java_trim(issuer) else None
        if self._issuer is None and not settings.allow_unverified_issuer:
            raise _unverified_error(
                EXPECTED_ISSUER,
                'issuer ("iss")',
                "the issuer URL of the OAuth/OIDC provider that signs the tokens",
                ALLOW_UNVERIFIED_ISSUER,
                "their issuer",
            )
        self._audience = sorted(set(settings.expected_audience)) or None
        if self._audience is None:
            log.warning(
                'The OAuth broker validator is configured with a JWKS endpoint but without "%s", '
                'and "%s" is set to true, so it will accept a JWT regardless of its "aud" '
                "(audience) claim.",
                EXPECTED_AUDIENCE,
                ALLOW_UNVERIFIED_AUDIENCE,
            )
        if self._issuer is None:
            log.warning(
                'The OAuth broker validator is configured with a JWKS endpoint but without "%s", '
                'and "%s" is set to true, so it will accept a JWT bearing any (or no) "iss" '
                "(issuer) claim.",
                EXPECTED_ISSUER,
                ALLOW_UNVERIFIED_ISSUER,
            )
        self._clock_skew_seconds = settings.clock_skew_seconds
        self._keys = _key_source(settings, ssl_context)
        self._options: dict[str, Any] = {
            "require": ["exp", "iat"],
            "verify_aud": self._audience is not None,
            "verify_iat": False,  # jose4j requires iat but does not compare it with the clock
            "enforce_minimum_key_length": True,  # as jose4j: RSA >= 2048 bits, HMAC >= hash
        }

    async def start(self) -> None:
        await self._keys.start()

    async def close(self) -> None:
        await self._keys.close()

    async def validate(self, token_value: str) -> OAuthBearerToken:
        try:
            return await self._validate(token_value)
        except TokenValidationError as e:
            log.warning("%s", e)
            raise

    async def _validate(self, token_value: str) -> OAuthBearerToken:
        token = java_trim(token_value)
        sections = token.split(".")
        if len(sections) != 3 or not all(java_trim(section) for section in sections):
            raise TokenValidationError(
                "Malformed JWT provided; expected three sections (header, payload, and signature)"
            )
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as e:
            raise _invalid(e) from e
        alg = header.get("alg")
        if alg not in KEY_TYPES:  # "none" included: Kafka's DISALLOW_NONE
            raise _invalid(f"the algorithm {alg!r} is not allowed")
        try:
            key = await self._keys.key_for(header)
            claims = jwt.decode(
                token,
                key,
                algorithms=[alg],
                audience=self._audience,
                issuer=self._issuer,
                leeway=self._clock_skew_seconds,
                options=self._options,
            )
        except (NoVerificationKeyError, jwt.PyJWTError) as e:
            raise _invalid(e) from e
        _check_as_jose4j(claims)
        return self._token(token_value, claims)

    def _token(self, token_value: str, claims: Mapping[str, Any]) -> OAuthBearerToken:
        """The claims read as Kafka's ``BrokerJwtValidator`` reads them, in its order."""
        raw_scope = claims.get(self._scope_claim_name)
        if isinstance(raw_scope, str):
            items = [raw_scope]
        elif isinstance(raw_scope, list):
            items = raw_scope
        else:
            items = []
        subject = claims.get(self._sub_claim_name)
        if subject is not None and not isinstance(subject, str):
            raise _cannot_extract(self._sub_claim_name)
        scope: set[str] = set()
        for item in items:
            item = _claim_string(self._scope_claim_name, item)
            if item in scope:
                raise TokenValidationError(
                    f"{self._scope_claim_name} value must not contain duplicates - "
                    f"{item} already present"
                )
            scope.add(item)
        principal = _claim_string(self._sub_claim_name, subject)
        # jose4j's NumericDate: whole seconds, a fraction dropped. A negative exp has expired.
        expiration_ms, issued_at_ms = int(claims["exp"]) * 1000, int(claims["iat"]) * 1000
        if issued_at_ms < 0:
            raise TokenValidationError(
                f'iat value must be null or non-negative; value given was "{issued_at_ms}"'
            )
        return OAuthBearerToken(
            token_value, principal, frozenset(scope), expiration_ms, issued_at_ms
        )
