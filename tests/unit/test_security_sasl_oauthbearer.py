"""SASL OAUTHBEARER: the client's message, the server's exchange, the client.

Expected bytes and messages were taken from Kafka 4.4's own classes
(OAuthBearerClientInitialResponse, OAuthBearerSaslServer with the unsecured validator)
run on the same inputs.
"""

from __future__ import annotations

import asyncio
import base64
import json

import pytest

from kpybroker.security.sasl.mechanism import SaslAuthenticationError, invalid_credentials_message
from kpybroker.security.sasl.oauthbearer import (
    ClientInitialResponse,
    InvalidClientMessageError,
    OAuthBearerSaslClient,
    OAuthBearerSaslServer,
    OAuthBearerToken,
    TokenValidationError,
)
from kpybroker.security.sasl.unsecured_jws import UnsecuredJwsValidator

NOW_S = 1_700_000_000
NOW_MS = NOW_S * 1000 + 123

#: What Kafka 4.4's OAuthBearerUnsecuredLoginCallbackHandler makes for
#: unsecuredLoginStringClaim_sub="alice" at NOW_MS: what a Java client sends.
KAFKA_UNSECURED_TOKEN = (
    "eyJhbGciOiJub25lIn0."
    "eyJleHAiOjEuNzAwMDAzNjAwMTIzRTksImlhdCI6MS43MDAwMDAwMDAxMjNFOSwic3ViIjoiYWxpY2UifQ."
)


def unsecured_token(claims: dict[str, object]) -> str:
    def section(value: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{section({'alg': 'none'})}.{section(claims)}."


GOOD = unsecured_token({"sub": "alice", "exp": NOW_S + 3600, "iat": NOW_S})
EXPIRED = unsecured_token({"sub": "alice", "exp": NOW_S - 10})


def first_message(token: str, authzid: str = "", extensions: str = "") -> bytes:
    authz = f"a={authzid}" if authzid else ""
    return f"n,{authz},\x01auth=Bearer {token}{extensions}\x01\x01".encode()


def server(options: dict[str, str] | None = None) -> OAuthBearerSaslServer:
    return OAuthBearerSaslServer(UnsecuredJwsValidator(options or {}, now_ms=lambda: NOW_MS))


def evaluate(srv: OAuthBearerSaslServer, response: bytes) -> bytes:
    return asyncio.run(srv.evaluate(response))


# ------------------------------------------------------------------ the client's message


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (ClientInitialResponse("tok.en."), b"n,,\x01auth=Bearer tok.en.\x01\x01"),
        (
            ClientInitialResponse("tok.en.", extensions={"traceId": "abc 123"}),
            b"n,,\x01auth=Bearer tok.en.\x01traceId=abc 123\x01\x01",
        ),
        (ClientInitialResponse("tok.en.", "alice"), b"n,a=alice,\x01auth=Bearer tok.en.\x01\x01"),
    ],
)
def test_the_first_message_is_byte_for_byte_what_kafkas_java_client_sends(
    message: ClientInitialResponse, expected: bytes
) -> None:
    assert message.to_bytes() == expected
    assert ClientInitialResponse.parse(expected) == message


def test_parsing_takes_the_authzid_undecoded_extensions_and_the_last_repeated_key() -> None:
    parsed = ClientInitialResponse.parse(
        b"n,a=al=3Dice,\x01auth=Bearer x\x01a=1\x01b=x=y z\x01a=2\x01\x01"
    )
    assert parsed == ClientInitialResponse("x", "al=3Dice", {"a": "2", "b": "x=y z"})
    assert ClientInitialResponse.parse(b"n,,\x01auth=bEaReR   abc==\x01\x01").token_value == "abc=="


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "Invalid OAUTHBEARER client first message"),
        (b"\x01", "Invalid OAUTHBEARER client first message"),
        (b"y,,\x01auth=Bearer abc\x01\x01", "Invalid OAUTHBEARER client first message"),
        (b"n,,\x01auth=Bearer abc\x01", "Invalid OAUTHBEARER client first message"),
        (b"n,a=al=ice,\x01auth=Bearer abc\x01\x01", "Invalid OAUTHBEARER client first message"),
        (b"n,,\x01auth=Bearer abc\x011x=y\x01\x01", "Invalid OAUTHBEARER client first message"),
        (b"n,,\x01\x01", "Invalid OAUTHBEARER client first message: 'auth' not specified"),
        (
            b"n,,\x01AUTH=Bearer abc\x01\x01",
            "Invalid OAUTHBEARER client first message: 'auth' not specified",
        ),
        (
            b"n,,\x01auth=Bearer\x01\x01",
            "Invalid OAUTHBEARER client first message: invalid 'auth' format",
        ),
        (
            b"n,,\x01auth=Bearer a b\x01\x01",
            "Invalid OAUTHBEARER client first message: invalid 'auth' format",
        ),
        (
            b"n,,\x01auth=Bearer !!!.abc.\x01\x01",
            "Invalid OAUTHBEARER client first message: invalid 'auth' format",
        ),
        (
            b"n,,\x01auth=Bearer a.b==.\x01\x01",
            "Invalid OAUTHBEARER client first message: invalid 'auth' format",
        ),
        (
            b"n,,\x01auth=Basic abc\x01\x01",
            "Invalid scheme in OAUTHBEARER client first message: Basic",
        ),
    ],
)
def test_malformed_first_messages_are_refused_with_kafkas_reason(data: bytes, reason: str) -> None:
    with pytest.raises(InvalidClientMessageError) as e:
        ClientInitialResponse.parse(data)
    assert str(e.value) == reason


@pytest.mark.parametrize(
    ("extensions", "reason"),
    [
        ({"auth": "x"}, "Extension name auth is invalid"),
        ({"trace-id": "x"}, "Extension name trace-id is invalid"),
        ({"traceId": "a\x01b"}, "Extension value (a\x01b) for extension traceId is invalid"),
        ({"traceId": ""}, "Extension value () for extension traceId is invalid"),
    ],
)
def test_extensions_must_follow_rfc_7628(extensions: dict[str, str], reason: str) -> None:
    with pytest.raises(InvalidClientMessageError) as e:
        ClientInitialResponse("t", extensions=extensions)
    assert str(e.value) == reason


# ------------------------------------------------------------------ the server


def test_a_kafka_java_clients_unsecured_token_authenticates_in_one_round_trip() -> None:
    srv = server()
    assert evaluate(srv, first_message(KAFKA_UNSECURED_TOKEN)) == b""
    assert srv.is_complete
    assert srv.authorization_id == "alice"
    assert srv.credential_expiry_ms == 1_700_003_600_123
    assert srv.token.start_time_ms == NOW_MS


def test_the_server_keeps_the_extensions_and_accepts_a_matching_authzid() -> None:
    srv = server()
    evaluate(srv, first_message(GOOD, "alice", "\x01traceId=abc 123\x01foo=bar=baz"))
    assert srv.authorization_id == "alice"
    assert srv.extensions == {"traceId": "abc 123", "foo": "bar=baz"}


def test_an_authzid_other_than_the_tokens_principal_fails_at_once() -> None:
    with pytest.raises(SaslAuthenticationError) as e:
        evaluate(server(), first_message(GOOD, "bob"))
    assert str(e.value) == (
        "Authentication failed: Client requested an authorization id (bob) that is different "
        "from the token's principal name (alice)"
    )


def test_the_authzid_is_compared_undecoded_as_kafka_does() -> None:
    with pytest.raises(SaslAuthenticationError, match=r"authorization id \(al=3Dice\)"):
        evaluate(server(), first_message(GOOD, "al=3Dice"))


def test_an_invalid_token_is_answered_with_a_json_error_and_fails_on_the_acknowledgement() -> None:
    srv = server()
    assert evaluate(srv, first_message(EXPIRED)) == b'{"status":"invalid_token"}'
    assert not srv.is_complete
    with pytest.raises(SaslAuthenticationError) as e:
        evaluate(srv, b"\x01")
    assert str(e.value) == '{"status":"invalid_token"}'


def test_a_missing_scope_is_answered_insufficient_scope_with_the_required_scope() -> None:
    srv = server({"unsecuredValidatorRequiredScope": " LOGIN_TO_KAFKA  OTHER "})
    token = unsecured_token({"sub": "alice", "exp": NOW_S + 60, "scope": "LOGIN_TO_KAFKA"})
    expected = '{"status":"insufficient_scope", "scope":"[LOGIN_TO_KAFKA, OTHER]"}'
    assert evaluate(srv, first_message(token)) == expected.encode()
    with pytest.raises(SaslAuthenticationError) as e:
        evaluate(srv, b"\x01")
    assert str(e.value) == expected


def test_after_an_error_the_client_may_try_another_token() -> None:
    srv = server()
    evaluate(srv, first_message(EXPIRED))
    assert evaluate(srv, first_message(GOOD)) == b""
    assert srv.authorization_id == "alice"


def test_anything_but_a_lone_ctrl_a_after_an_error_is_read_as_a_new_first_message() -> None:
    srv = server()
    evaluate(srv, first_message(EXPIRED))
    with pytest.raises(SaslAuthenticationError) as e:
        evaluate(srv, b"\x01\x01")
    assert str(e.value) == invalid_credentials_message("OAUTHBEARER")
    assert str(e.value.__cause__) == "Invalid OAUTHBEARER client first message"


def test_a_lone_ctrl_a_without_an_error_is_a_malformed_message() -> None:
    with pytest.raises(
        SaslAuthenticationError, match=f"^{invalid_credentials_message('OAUTHBEARER')}$"
    ):
        evaluate(server(), b"\x01")


def test_a_malformed_message_gets_kafkas_message_that_hides_the_detail() -> None:
    with pytest.raises(SaslAuthenticationError) as e:
        evaluate(server(), b"n,,\x01auth=Basic abc\x01\x01")
    assert str(e.value) == (
        "Authentication failed during authentication due to invalid credentials with SASL "
        "mechanism OAUTHBEARER"
    )
    assert "Basic" in str(e.value.__cause__)


def test_results_are_not_available_before_completion() -> None:
    srv = server()
    for result in ("authorization_id", "credential_expiry_ms", "token", "extensions"):
        with pytest.raises(RuntimeError, match="has not completed"):
            getattr(srv, result)


class _RejectingValidator:
    async def validate(self, token_value: str) -> OAuthBearerToken:
        raise TokenValidationError(
            "no", status="invalid_token", scope="a b", openid_configuration="https://idp/.wk"
        )


def test_the_json_error_carries_scope_and_openid_configuration_in_kafkas_format() -> None:
    srv = OAuthBearerSaslServer(_RejectingValidator())
    assert evaluate(srv, first_message("x")) == (
        b'{"status":"invalid_token", "scope":"a b", "openid-configuration":"https://idp/.wk"}'
    )


# ------------------------------------------------------------------ the client


def test_the_client_and_the_server_complete_an_exchange() -> None:
    srv = server()
    client = OAuthBearerSaslClient(KAFKA_UNSECURED_TOKEN, {"traceId": "t1"})
    assert client.initial_response() == first_message(KAFKA_UNSECURED_TOKEN, "", "\x01traceId=t1")
    challenge = evaluate(srv, client.initial_response())
    assert client.evaluate(challenge) == b""
    assert client.is_complete and srv.is_complete
    assert srv.extensions == {"traceId": "t1"}


def test_the_client_acknowledges_an_error_with_ctrl_a_and_the_server_then_fails() -> None:
    srv = server()
    client = OAuthBearerSaslClient(EXPIRED)
    challenge = evaluate(srv, client.initial_response())
    acknowledgement = client.evaluate(challenge)
    assert acknowledgement == b"\x01"
    assert client.server_error == '{"status":"invalid_token"}'
    assert not client.is_complete
    with pytest.raises(SaslAuthenticationError, match="invalid_token"):
        evaluate(srv, acknowledgement)
    with pytest.raises(SaslAuthenticationError, match="Unexpected challenge"):
        client.evaluate(b"more")


def test_the_client_refuses_extensions_rfc_7628_forbids() -> None:
    with pytest.raises(InvalidClientMessageError, match="Extension name auth is invalid"):
        OAuthBearerSaslClient("t", {"auth": "x"})
