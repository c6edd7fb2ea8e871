"""Kafka's unsecured OAUTHBEARER tokens: the validator and the login token.

Outcomes and reasons are those of Kafka 4.4's OAuthBearerUnsecuredValidatorCallbackHandler and
OAuthBearerUnsecuredJws on the same tokens, at the same (fixed) time.
"""

from __future__ import annotations

import asyncio
import base64
import json

import pytest

from kpybroker.security.sasl.oauthbearer import OAuthBearerToken, TokenValidationError
from kpybroker.security.sasl.unsecured_jws import (
    OAuthBearerConfigError,
    UnsecuredJwsValidator,
    unsecured_login_extensions,
    unsecured_login_token,
)

NOW_S = 1_700_000_000
NOW_MS = NOW_S * 1000 + 123

#: Kafka 4.4's OAuthBearerUnsecuredLoginCallbackHandler at NOW_MS with
#: unsecuredLoginStringClaim_sub="alice".
KAFKA_TOKEN_ALICE = (
    "eyJhbGciOiJub25lIn0."
    "eyJleHAiOjEuNzAwMDAzNjAwMTIzRTksImlhdCI6MS43MDAwMDAwMDAxMjNFOSwic3ViIjoiYWxpY2UifQ."
)
#: ... and with unsecuredLoginListClaim_scope=",KAFKA_BROKER,LOGIN_TO_KAFKA" and
#: unsecuredLoginNumberClaim_n="5" too (its claims in the order of Java's HashMap).
KAFKA_TOKEN_WITH_SCOPE = (
    "eyJhbGciOiJub25lIn0."
    "eyJleHAiOjEuNzAwMDAzNjAwMTIzRTksImlhdCI6MS43MDAwMDAwMDAxMjNFOSwic2NvcGUiOlsiS0FGS0FfQlJPS0VS"
    "IiwiTE9HSU5fVE9fS0FGS0EiXSwibiI6NS4wLCJzdWIiOiJhbGljZSJ9."
)


NOT_THREE_SECTIONS = (
    "Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values"
)


def b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).rstrip(b"=").decode()


def token(claims: dict[str, object] | str, header: str = '{"alg":"none"}', sig: str = "") -> str:
    text = claims if isinstance(claims, str) else json.dumps(claims)
    return f"{b64(header)}.{b64(text)}.{sig}"


def validate(value: str, options: dict[str, str] | None = None) -> OAuthBearerToken:
    validator = UnsecuredJwsValidator(options or {}, now_ms=lambda: NOW_MS)
    return asyncio.run(validator.validate(value))


def rejection(value: str, options: dict[str, str] | None = None) -> TokenValidationError:
    with pytest.raises(TokenValidationError) as e:
        validate(value, options)
    return e.value


def test_kafkas_login_tokens_are_accepted() -> None:
    accepted = validate(KAFKA_TOKEN_ALICE)
    assert accepted == OAuthBearerToken(
        KAFKA_TOKEN_ALICE, "alice", frozenset(), 1_700_003_600_123, NOW_MS
    )
    with_scope = validate(
        KAFKA_TOKEN_WITH_SCOPE, {"unsecuredValidatorRequiredScope": "LOGIN_TO_KAFKA"}
    )
    assert with_scope.scope == {"KAFKA_BROKER", "LOGIN_TO_KAFKA"}


@pytest.mark.parametrize(
    ("claims", "principal", "lifetime_ms", "scope"),
    [
        (
            {"sub": "alice", "exp": NOW_S + 10, "scope": "a b"},
            "alice",
            (NOW_S + 10) * 1000,
            {"a b"},
        ),
        ({"sub": "alice", "exp": NOW_S + 10, "scope": [" a ", "", "b"]}, "alice", None, {"a", "b"}),
        ({"sub": " alice ", "exp": NOW_S + 10}, " alice ", None, set()),
        ({"sub": None, "exp": NOW_S + 10}, "null", None, set()),
        ({"sub": True, "exp": NOW_S + 10}, "true", None, set()),
        ({"sub": "alice", "exp": 9_999_999_999.5}, "alice", 9_999_999_999_500, set()),
        ({"sub": "alice", "exp": 99_999_999_999_999_999_999}, "alice", 2**63 - 1, set()),
        ({"sub": "alice", "exp": 1e10}, "alice", 10_000_000_000_000, set()),
    ],
)
def test_claims_read_as_kafka_reads_them(
    claims: dict[str, object], principal: str, lifetime_ms: int | None, scope: set[str]
) -> None:
    accepted = validate(token(claims))
    assert accepted.principal_name == principal
    assert accepted.scope == scope
    if lifetime_ms is not None:
        assert accepted.lifetime_ms == lifetime_ms


def test_trailing_text_after_the_json_is_ignored_as_jackson_ignores_it() -> None:
    assert validate(token('{"sub":"alice","exp":9999999999}xyz')).principal_name == "alice"


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("a..b", "Malformed compact serialization contains '..'"),
        ("abc", NOT_THREE_SECTIONS),
        (token({"sub": "alice", "exp": NOW_S + 10}) + "x.", NOT_THREE_SECTIONS),
        (f"{b64('{}')}.ab+c.", "malformed Base64 URL encoded value"),
        (f"{b64('{}')}.a.", "malformed Base64 URL encoded value"),
        (token("nope"), "malformed JSON"),
        (
            token({"sub": "alice", "exp": NOW_S + 10}, header="{}"),
            "JWS header must have an Algorithm value",
        ),
        (
            token({"sub": "alice", "exp": NOW_S + 10}, header="[]"),
            "JWS header must have an Algorithm value",
        ),
        (
            token({"sub": "alice", "exp": NOW_S + 10}, header='{"alg":"HS256"}'),
            "Unsecured JWS must have 'none' for an algorithm",
        ),
        (
            token({"sub": "alice", "exp": NOW_S + 10}, sig="abc"),
            "Unsecured JWS must not contain a digital signature",
        ),
        (token({"sub": "alice"}), "No expiration time in JWT"),
        (token({"sub": "alice", "exp": "x"}), "The 'exp' claim was not of type Number: String"),
        (token({"sub": "alice", "exp": [1]}), "The 'exp' claim was not of type Number: ArrayList"),
        (
            token({"sub": "alice", "exp": NOW_S + 10, "scope": 5}),
            "The 'scope' claim was not of type List: Integer",
        ),
        (token({"exp": NOW_S + 10}), "No principal name in JWT claim: sub"),
        (token({"sub": "  ", "exp": NOW_S + 10}), "No principal name in JWT claim: sub"),
        (token({"sub": 5, "exp": NOW_S + 10}), "The 'sub' claim was not of type String: Integer"),
        (
            token({"sub": 2.5, "exp": NOW_S + 10}),
            "The 'sub' claim was not of type String: Double",
        ),
        (
            token({"sub": 2**40, "exp": NOW_S + 10}),
            "The 'sub' claim was not of type String: Long",
        ),
        (
            token({"sub": "alice", "exp": NOW_S + 10, "iat": "x"}),
            "The 'iat' claim was not of type Number: String",
        ),
        (
            token({"sub": "alice", "exp": NOW_S - 10}),
            "The indicated time (1700000000123 ms) minus allowable clock skew (0 ms) was on or "
            "after the Expiration Time value (1699999990.000000 seconds)",
        ),
        (
            token({"sub": "alice", "exp": NOW_S + 10, "iat": NOW_S + 5}),
            "The Issued At value (1700000005.000000 seconds) was after the indicated time "
            "(1700000000123 ms) plus allowable clock skew (0 ms)",
        ),
    ],
)
def test_tokens_kafka_rejects_are_rejected_with_its_reason(value: str, reason: str) -> None:
    rejected = rejection(value)
    assert str(rejected) == reason
    assert rejected.json_error() == '{"status":"invalid_token"}'


def test_the_clock_skew_option_widens_both_ends() -> None:
    options = {"unsecuredValidatorAllowableClockSkewMs": "3000"}
    assert validate(token({"sub": "a", "exp": NOW_S - 1}), options).principal_name == "a"
    assert validate(token({"sub": "a", "exp": NOW_S + 9, "iat": NOW_S + 2}), options)
    assert "minus allowable clock skew (3000 ms)" in str(
        rejection(token({"sub": "a", "exp": NOW_S - 3}), options)
    )
    assert "plus allowable clock skew (3000 ms)" in str(
        rejection(token({"sub": "a", "exp": NOW_S + 9, "iat": NOW_S + 4}), options)
    )


def test_an_expiration_not_after_the_issue_time_is_rejected() -> None:
    options = {"unsecuredValidatorAllowableClockSkewMs": "100000"}
    assert str(rejection(token({"sub": "a", "exp": NOW_S + 10, "iat": NOW_S + 20}), options)) == (
        "The Expiration Time time (1700000010.000000 seconds) was not after the Issued At time "
        "(1700000020.000000 seconds)"
    )


def test_the_required_scope_option_answers_insufficient_scope() -> None:
    options = {"unsecuredValidatorRequiredScope": " LOGIN_TO_KAFKA  OTHER "}
    accepted = validate(
        token({"sub": "a", "exp": NOW_S + 9, "scope": ["OTHER", "LOGIN_TO_KAFKA", "X"]}), options
    )
    assert accepted.scope == {"OTHER", "LOGIN_TO_KAFKA", "X"}
    rejected = rejection(token({"sub": "a", "exp": NOW_S + 9, "scope": "LOGIN_TO_KAFKA"}), options)
    assert rejected.status == "insufficient_scope"
    assert rejected.json_error() == (
        '{"status":"insufficient_scope", "scope":"[LOGIN_TO_KAFKA, OTHER]"}'
    )
    assert str(rejected) == (
        "The provided scope ([LOGIN_TO_KAFKA]) was missing a required scope (OTHER).  "
        "All required scope elements: [LOGIN_TO_KAFKA, OTHER]"
    )
    # a string scope is one scope, not split on spaces
    assert rejection(
        token({"sub": "a", "exp": NOW_S + 9, "scope": "LOGIN_TO_KAFKA OTHER"}), options
    )


def test_the_claim_name_options() -> None:
    options = {
        "unsecuredValidatorPrincipalClaimName": " usr ",
        "unsecuredValidatorScopeClaimName": "roles",
    }
    accepted = validate(token({"usr": "bob", "roles": ["r"], "exp": NOW_S + 9}), options)
    assert (accepted.principal_name, accepted.scope) == ("bob", {"r"})
    assert str(rejection(token({"sub": "a", "exp": NOW_S + 9}), options)) == (
        "No principal name in JWT claim: usr"
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"unsecuredValidatorAllowableClockSkewMs": "abc"}, 'For input string: "abc"'),
        (
            {"unsecuredValidatorAllowableClockSkewMs": "9999999999"},
            'For input string: "9999999999"',
        ),
        (
            {"unsecuredValidatorAllowableClockSkewMs": "-1"},
            "Allowable clock skew millis must not be negative: -1",
        ),
        ({"unsecuredValidatorRequiredScope": 'a"b'}, 'Invalid scope value: a"b'),
    ],
)
def test_unusable_options_fail_construction_with_kafkas_message(
    options: dict[str, str], message: str
) -> None:
    with pytest.raises(OAuthBearerConfigError) as e:
        UnsecuredJwsValidator(options)
    assert str(e.value) == message


# ------------------------------------------------------------------ the login token


def test_the_login_token_is_byte_for_byte_kafkas() -> None:
    assert unsecured_login_token({"unsecuredLoginStringClaim_sub": "alice"}, NOW_MS) == (
        KAFKA_TOKEN_ALICE
    )
    options = {
        "unsecuredLoginListClaim_scope": ",KAFKA_BROKER,LOGIN_TO_KAFKA",
        "unsecuredLoginNumberClaim_n": "5",
        "unsecuredLoginStringClaim_sub": "alice",
    }
    assert unsecured_login_token(options, NOW_MS) == KAFKA_TOKEN_WITH_SCOPE


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (",a,,b,", ["a", "", "b", ""]),
        ("|x|y", ["x", "y"]),
        (",,a", ["", "a", ""]),
        ("x", []),
    ],
)
def test_list_claims_split_as_kafkas_do(value: str, expected: list[str]) -> None:
    options = {"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginListClaim_l": value}
    compact = unsecured_login_token(options, NOW_MS)
    assert compact is not None
    payload = compact.split(".")[1]
    assert (
        json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["l"] == expected
    )


def test_login_options_principal_claim_name_lifetime_and_extensions() -> None:
    options = {
        "unsecuredLoginStringClaim_user": "carol",
        "unsecuredLoginPrincipalClaimName": "user",
        "unsecuredLoginLifetimeSeconds": "60",
        "unsecuredLoginExtension_traceId": "t1",
    }
    compact = unsecured_login_token(options, NOW_MS)
    assert compact is not None
    accepted = validate(compact, {"unsecuredValidatorPrincipalClaimName": "user"})
    assert (accepted.principal_name, accepted.lifetime_ms) == ("carol", NOW_MS + 60_000)
    assert unsecured_login_extensions(options) == {"traceId": "t1"}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"unsecuredLoginExtension_a": "b"},
            "Extensions provided in login context without a token",
        ),
        ({"unsecuredLoginStringClaim_exp": "1"}, "Cannot explicitly set the 'exp' claim"),
        ({"unsecuredLoginNumberClaim_n": "x"}, 'For input string: "x"'),
        ({"unsecuredLoginLifetimeSeconds": "1h"}, 'For input string: "1h"'),
        ({"unsecuredLoginStringClaim_user": "carol"}, "No principal name in JWT claim: sub"),
    ],
)
def test_unusable_login_options(options: dict[str, str], message: str) -> None:
    with pytest.raises(OAuthBearerConfigError) as e:
        unsecured_login_token(options, NOW_MS)
    assert str(e.value) == message


def test_no_login_options_no_token_and_invalid_extensions_refused() -> None:
    assert unsecured_login_token({}, NOW_MS) is None
    with pytest.raises(OAuthBearerConfigError, match="Extension name auth is invalid"):
        unsecured_login_extensions({"unsecuredLoginExtension_auth": "x"})
