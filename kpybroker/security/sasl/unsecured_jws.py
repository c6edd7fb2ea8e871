"""Kafka's unsecured OAUTHBEARER tokens (JWS with alg "none"): for development, never for real use.

With no server callback handler configured, a Kafka broker accepts unsigned tokens and
believes what they claim; the listener's JAAS options tune the checks (Kafka's
``OAuthBearerUnsecuredValidatorCallbackHandler``): ``unsecuredValidatorPrincipalClaimName``
(default "sub"), ``unsecuredValidatorScopeClaimName`` ("scope"),
``unsecuredValidatorRequiredScope`` (space separated, none by default) and
``unsecuredValidatorAllowableClockSkewMs`` (0). ``exp`` is required, ``iat`` optional and
``nbf`` ignored. The ``unsecuredLogin*`` options make such a token for the client side
(Kafka's ``OAuthBearerUnsecuredLoginCallbackHandler``), which is how a broker set up this way
authenticates to its peers.

Parsing follows Kafka's ``OAuthBearerUnsecuredJws`` and the JSON model it reads through
(Jackson): a claim is a string, a number or a list of strings, and any other JSON value is
read as text (``null`` as "null"), so the same tokens pass and fail as on Kafka.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import math
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kpybroker.config.core import java_str, java_trim
from kpybroker.security.sasl.oauthbearer import (
    InvalidClientMessageError,
    OAuthBearerToken,
    TokenValidationError,
    validate_extensions,
)

log = logging.getLogger(__name__)

PRINCIPAL_CLAIM_NAME_OPTION = "unsecuredValidatorPrincipalClaimName"
SCOPE_CLAIM_NAME_OPTION = "unsecuredValidatorScopeClaimName"
REQUIRED_SCOPE_OPTION = "unsecuredValidatorRequiredScope"
ALLOWABLE_CLOCK_SKEW_MS_OPTION = "unsecuredValidatorAllowableClockSkewMs"

LOGIN_PRINCIPAL_CLAIM_NAME_OPTION = "unsecuredLoginPrincipalClaimName"
LOGIN_SCOPE_CLAIM_NAME_OPTION = "unsecuredLoginScopeClaimName"
LOGIN_LIFETIME_SECONDS_OPTION = "unsecuredLoginLifetimeSeconds"
LOGIN_STRING_CLAIM_PREFIX = "unsecuredLoginStringClaim_"
LOGIN_NUMBER_CLAIM_PREFIX = "unsecuredLoginNumberClaim_"
LOGIN_LIST_CLAIM_PREFIX = "unsecuredLoginListClaim_"
LOGIN_EXTENSION_PREFIX = "unsecuredLoginExtension_"

#: A claim as Kafka models it.
Claim = str | int | float | list[str]

_BASE64URL = re.compile(r"[A-Za-z0-9_-]*={0,2}")
_SCOPE_ITEM = re.compile(r"[\x23-\x5b\x5d-\x7e\x21]+")  # RFC 6749 §3.3
_JAVA_INT = re.compile(r"[+-]?[0-9]+")
_JAVA_LONG_MAX = 2**63 - 1
_UNSECURED_HEADER = '{"alg":"none"}'


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


_JSON = json.JSONDecoder(parse_constant=_reject_constant)


class OAuthBearerConfigError(ValueError):
    """A JAAS option is unusable (Kafka's ``OAuthBearerConfigException``, same messages)."""


def _jackson_text(value: object) -> str:
    """Jackson's ``JsonNode.asText()``: what Kafka reads a non-number, non-array value as."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None or isinstance(value, (int, float)):
        return java_str(value)
    return ""  # an object or an array


def _jackson_claim(value: object) -> Claim:
    if isinstance(value, list):
        return [_jackson_text(element) for element in value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    return _jackson_text(value)


def _decode_section(section: str) -> dict[str, Claim]:
    """A base64url JSON section as Kafka's ``OAuthBearerUnsecuredJws.toMap`` reads it.

    Java's URL-safe decoder: no other alphabet, padding optional but right when present.
    Jackson: the first JSON value counts (trailing text is ignored) and a non-object has no
    members.
    """
    padded = section if section.endswith("=") else section + "=" * (-len(section) % 4)
    try:
        data = base64.urlsafe_b64decode(padded) if _BASE64URL.fullmatch(section) else None
    except binascii.Error:
        data = None
    if data is None:
        raise TokenValidationError("malformed Base64 URL encoded value")
    try:
        value, _ = _JSON.raw_decode(data.decode("utf-8").lstrip(" \t\r\n"))
    except ValueError:
        raise TokenValidationError("malformed JSON") from None
    if not isinstance(value, dict):
        return {}
    return {name: _jackson_claim(member) for name, member in value.items()}


def _java_class_name(value: Claim) -> str:
    """The simple name of the Java class Jackson reads ``value`` as, for Kafka's messages."""
    if isinstance(value, str):
        return "String"
    if isinstance(value, list):
        return "ArrayList"
    if isinstance(value, float):
        return "Double"
    if -(2**31) <= value < 2**31:
        return "Integer"
    return "Long" if -(2**63) <= value <= _JAVA_LONG_MAX else "BigInteger"


_JAVA_TYPES: dict[str, type | tuple[type, ...]] = {
    "Number": (int, float),
    "String": str,
    "List": list,
}


def _claim(claims: Mapping[str, Claim], name: str, java_type: str) -> Claim | None:
    """Kafka's ``claim(name, type)``: absent, or of ``java_type`` ("Number", "String" or
    "List"); otherwise the token is rejected."""
    value = claims.get(name)
    if value is None or isinstance(value, _JAVA_TYPES[java_type]):
        return value
    raise TokenValidationError(
        f"The '{name}' claim was not of type {java_type}: {_java_class_name(value)}"
    )


def _double(number: int | float) -> float:
    """Java's ``Number.doubleValue()``, which saturates where Python's float() raises."""
    try:
        return float(number)
    except OverflowError:
        return math.copysign(math.inf, number)


def _seconds_to_ms(seconds: int | float) -> int:
    """Kafka's ``Math.round(seconds.doubleValue() * 1000)``, saturating like Java's."""
    ms = _double(seconds) * 1000
    if math.isnan(ms):
        return 0
    if ms >= 2.0**63:
        return _JAVA_LONG_MAX
    if ms <= -(2.0**63):
        return -(2**63)
    return math.floor(ms + 0.5)


def _is_blank(text: str | None) -> bool:
    return text is None or not java_trim(text)


@dataclass(frozen=True, slots=True)
class UnsecuredJws:
    """A parsed unsecured token (Kafka's ``OAuthBearerUnsecuredJws``)."""

    value: str
    claims: Mapping[str, Claim]
    principal_name: str
    scope: frozenset[str]
    #: ``exp`` and ``iat`` as claimed, in seconds.
    expiration_time: int | float
    issued_at: int | float | None

    @classmethod
    def parse(
        cls, compact: str, principal_claim_name: str = "sub", scope_claim_name: str = "scope"
    ) -> UnsecuredJws:
        """Raises ``TokenValidationError`` with Kafka's reason when ``compact`` is no unsecured
        token, lacks ``exp`` or a principal, or has a claim of the wrong type."""
        if ".." in compact:
            raise TokenValidationError("Malformed compact serialization contains '..'")
        splits = compact.split(".")
        if len(splits) != 3:
            raise TokenValidationError(
                "Unsecured JWS compact serializations must have 3 dot-separated "
                "Base64URL-encoded values"
            )
        header = _decode_section(splits[0])
        claims = _decode_section(splits[1])
        alg = header.get("alg")
        if alg is None:  # Kafka fails with a NullPointerException here and drops the connection
            raise TokenValidationError("JWS header must have an Algorithm value")
        if alg != "none":
            raise TokenValidationError("Unsecured JWS must have 'none' for an algorithm")
        if splits[2]:
            raise TokenValidationError("Unsecured JWS must not contain a digital signature")
        scope = _scope(claims, scope_claim_name)
        expiration_time = _claim(claims, "exp", "Number")
        if expiration_time is None:
            raise TokenValidationError("No expiration time in JWT")
        principal_name = _claim(claims, principal_claim_name, "String")
        if not isinstance(principal_name, str) or _is_blank(principal_name):
            raise TokenValidationError(f"No principal name in JWT claim: {principal_claim_name}")
        issued_at = _claim(claims, "iat", "Number")
        assert isinstance(expiration_time, (int, float))
        assert issued_at is None or isinstance(issued_at, (int, float))
        return cls(compact, claims, principal_name, scope, expiration_time, issued_at)

    def token(self) -> OAuthBearerToken:
        return OAuthBearerToken(
            self.value,
            self.principal_name,
            self.scope,
            _seconds_to_ms(self.expiration_time),
            None if self.issued_at is None else _seconds_to_ms(self.issued_at),
        )


def _scope(claims: Mapping[str, Claim], name: str) -> frozenset[str]:
    """A string scope claim is one scope, whole (Kafka does not split it); a list is many."""
    value = claims.get(name)
    if isinstance(value, str):
        return frozenset() if _is_blank(value) else frozenset({java_trim(value)})
    items = _claim(claims, name, "List") or []
    assert isinstance(items, list)
    return frozenset(java_trim(item) for item in items if not _is_blank(item))


def parse_scope(space_delimited: str) -> tuple[str, ...]:
    """Kafka's ``OAuthBearerScopeUtils.parseScope``: RFC 6749 scope tokens, in order."""
    items = tuple(item for item in space_delimited.split(" ") if item)
    for item in items:
        if not _SCOPE_ITEM.fullmatch(item):
            raise OAuthBearerConfigError(f"Invalid scope value: {item}")
    return items


def _claim_name(options: Mapping[str, str], option: str, default: str) -> str:
    value = options.get(option)
    return default if value is None or _is_blank(value) else java_trim(value)


def _clock_skew_ms(options: Mapping[str, str]) -> int:
    value = options.get(ALLOWABLE_CLOCK_SKEW_MS_OPTION)
    if value is None or _is_blank(value):
        return 0
    text = java_trim(value)
    if not _JAVA_INT.fullmatch(text) or not -(2**31) <= int(text) < 2**31:
        raise OAuthBearerConfigError(f'For input string: "{text}"')
    if int(text) < 0:
        raise OAuthBearerConfigError(f"Allowable clock skew millis must not be negative: {value}")
    return int(text)


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class UnsecuredJwsValidator:
    """Kafka's ``OAuthBearerUnsecuredValidatorCallbackHandler``: the default OAUTHBEARER
    validator, configured by the listener's JAAS options.

    Kafka reads the options at each authentication and drops the connection when one is
    unusable; here they are read once and an unusable one fails construction.
    """

    def __init__(
        self, options: Mapping[str, str], *, now_ms: Callable[[], int] = _wall_clock_ms
    ) -> None:
        self._principal_claim_name = _claim_name(options, PRINCIPAL_CLAIM_NAME_OPTION, "sub")
        self._scope_claim_name = _claim_name(options, SCOPE_CLAIM_NAME_OPTION, "scope")
        required = options.get(REQUIRED_SCOPE_OPTION)
        self._required_scope = () if _is_blank(required) else parse_scope(java_trim(required))
        self._clock_skew_ms = _clock_skew_ms(options)
        self._now_ms = now_ms

    async def validate(self, token_value: str) -> OAuthBearerToken:
        jws = UnsecuredJws.parse(token_value, self._principal_claim_name, self._scope_claim_name)
        now, skew = self._now_ms(), self._clock_skew_ms
        expiration_time = _double(jws.expiration_time)
        if jws.issued_at is not None and 1000 * _double(jws.issued_at) > now + skew:
            raise TokenValidationError(
                f"The Issued At value ({_double(jws.issued_at):f} seconds) was after the "
                f"indicated time ({now} ms) plus allowable clock skew ({skew} ms)"
            )
        if now - skew >= 1000 * expiration_time:
            raise TokenValidationError(
                f"The indicated time ({now} ms) minus allowable clock skew ({skew} ms) was on or "
                f"after the Expiration Time value ({expiration_time:f} seconds)"
            )
        if jws.issued_at is not None and expiration_time <= _double(jws.issued_at):
            raise TokenValidationError(
                f"The Expiration Time time ({expiration_time:f} seconds) was not after the "
                f"Issued At time ({_double(jws.issued_at):f} seconds)"
            )
        self._check_scope(jws.scope)
        log.info(
            "Successfully validated token with principal %s: %s", jws.principal_name, jws.claims
        )
        return jws.token()

    def _check_scope(self, scope: frozenset[str]) -> None:
        for required in self._required_scope:
            if required not in scope:
                required_text = java_str(list(self._required_scope))
                raise TokenValidationError(
                    f"The provided scope ({java_str(sorted(scope))}) was missing a required "
                    f"scope ({required}).  All required scope elements: {required_text}",
                    status="insufficient_scope",
                    scope=required_text,
                )


# ------------------------------------------------------------------ the client side


def _json_string(text: str) -> str:
    # Kafka escapes only quotes and backslashes, but quotes first, so that a quote comes
    # out as \\" and breaks the JSON; backslashes first here.
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _list_claim_json(value: str) -> str:
    """Kafka's list option: the first character is the delimiter (",a,b" is ["a","b"]); an
    empty element anywhere adds one "" at the end, Java's split dropping trailing ones."""
    if len(value) <= 1:
        return "[]"
    delimiter, text = value[0], value[1:]
    elements = text.split(delimiter)
    while elements and not elements[-1]:
        elements.pop()
    if text.startswith(delimiter) or text.endswith(delimiter) or delimiter * 2 in text:
        elements.append("")
    return "[" + ",".join(map(_json_string, elements)) + "]"


def _option_claims(options: Mapping[str, str]) -> str:
    """The claims the string, number and list options set, each as ``,"name":value``."""
    text = ""
    for option, value in options.items():
        for prefix in (
            LOGIN_STRING_CLAIM_PREFIX,
            LOGIN_NUMBER_CLAIM_PREFIX,
            LOGIN_LIST_CLAIM_PREFIX,
        ):
            name = option.removeprefix(prefix)
            if option.startswith(prefix) and name:
                break
        else:
            continue
        if name in ("iat", "exp"):
            raise OAuthBearerConfigError(f"Cannot explicitly set the '{name}' claim")
        if prefix == LOGIN_STRING_CLAIM_PREFIX:
            claim = _json_string(value)
        elif prefix == LOGIN_NUMBER_CLAIM_PREFIX:
            try:
                claim = java_str(float(value))
            except ValueError:
                raise OAuthBearerConfigError(f'For input string: "{value}"') from None
        else:
            claim = _list_claim_json(value)
        text += f",{_json_string(name)}:{claim}"
    return text


def _base64url(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).rstrip(b"=").decode()


def unsecured_login_token(options: Mapping[str, str], now_ms: int) -> str | None:
    """The unsecured token the ``unsecuredLogin*`` JAAS options describe, as Kafka's
    ``OAuthBearerUnsecuredLoginCallbackHandler`` makes it: ``iat`` now, ``exp`` after
    ``unsecuredLoginLifetimeSeconds`` (3600), the ``unsecuredLogin{String,Number,List}Claim_``
    claims. None when there are no options (such a login cannot authenticate)."""
    if not options:
        return None
    if all(option.startswith(LOGIN_EXTENSION_PREFIX) for option in options):
        raise OAuthBearerConfigError("Extensions provided in login context without a token")
    lifetime = options.get(LOGIN_LIFETIME_SECONDS_OPTION, "3600")
    if not _JAVA_INT.fullmatch(lifetime) or not -(2**63) <= int(lifetime) <= _JAVA_LONG_MAX:
        raise OAuthBearerConfigError(f'For input string: "{lifetime}"')
    now_seconds = now_ms / 1000.0
    claims = (
        f'{{"exp":{java_str(now_seconds + int(lifetime))},"iat":{java_str(now_seconds)}'
        f"{_option_claims(options)}}}"
    )
    compact = f"{_base64url(_UNSECURED_HEADER)}.{_base64url(claims)}."
    try:
        UnsecuredJws.parse(
            compact,
            _claim_name(options, LOGIN_PRINCIPAL_CLAIM_NAME_OPTION, "sub"),
            _claim_name(options, LOGIN_SCOPE_CLAIM_NAME_OPTION, "scope"),
        )
    except TokenValidationError as e:  # no principal claim, most likely
        raise OAuthBearerConfigError(str(e)) from e
    return compact


def unsecured_login_extensions(options: Mapping[str, str]) -> dict[str, str]:
    """The SASL extensions the ``unsecuredLoginExtension_<name>`` options give."""
    extensions = {
        option.removeprefix(LOGIN_EXTENSION_PREFIX): value
        for option, value in options.items()
        if option.startswith(LOGIN_EXTENSION_PREFIX)
    }
    try:
        validate_extensions(extensions)
    except InvalidClientMessageError as e:
        raise OAuthBearerConfigError(str(e)) from e
    return extensions
