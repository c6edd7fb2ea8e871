"""The server side of SASL on a connection (Kafka's ``SaslServerAuthenticator``), frame by frame.

Frames go in as the connection cuts them off the socket (no size prefix); answers come
out as the parts the connection writes. The mechanisms are the real ones.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import pytest

from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.framing import decode_response, encode_request
from kpybroker.protocol.messages.api_versions import ApiVersionsRequest
from kpybroker.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from kpybroker.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from kpybroker.protocol.messages.sasl_handshake import SaslHandshakeRequest
from kpybroker.security.principal import KafkaPrincipal
from kpybroker.security.sasl.plain import PlainSaslClient, PlainSaslServer
from kpybroker.security.sasl.sasl_settings import SaslSettings
from kpybroker.security.sasl.scram import ScramSaslClient, ScramSaslServer
from kpybroker.security.sasl.scram_credentials import ScramMechanism
from kpybroker.server.sasl_authenticator import AuthFailure, SaslAuthenticator

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
SHA256 = ScramMechanism.SCRAM_SHA_256
CREDENTIALS = {name: SHA256.credential(password, 4096) for name, password in USERS.items()}


def authenticator(reauth_ms: int = 0) -> SaslAuthenticator:
    def new_server(mechanism: str) -> Any:
        if mechanism == "PLAIN":
            return PlainSaslServer(USERS)
        return ScramSaslServer(SHA256, lambda _, user: CREDENTIALS.get(user))

    settings = SaslSettings(
        mechanisms=("PLAIN", "SCRAM-SHA-256"),
        new_server=new_server,
        max_receive_size=524_288,
        reauth_ms=lambda mechanism: reauth_ms,
    )

    async def api_versions(frame: bytearray) -> tuple[list[Any], bool]:
        return [b"api-versions-answer"], True

    return SaslAuthenticator(settings, api_versions)


def frame(request: Any, version: int, correlation_id: int = 1) -> bytearray:
    return bytearray(encode_request(request, version, correlation_id, "test")[4:])


def answer(parts: list[Any], request: Any, version: int) -> Any:
    body = b"".join(bytes(p) for p in parts)[4:]
    return decode_response(body, request, version)[1]


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def handshake(auth: SaslAuthenticator, mechanism: str, version: int = 1) -> Any:
    request = SaslHandshakeRequest(mechanism=mechanism)
    return answer(run(auth.receive(frame(request, version))), request, version)


def authenticate(auth: SaslAuthenticator, token: bytes, version: int = 2) -> Any:
    request = SaslAuthenticateRequest(auth_bytes=token)
    return answer(run(auth.receive(frame(request, version))), request, version)


def test_plain_with_handshake_v1_and_authenticate() -> None:
    auth = authenticator()
    assert run(auth.receive(frame(ApiVersionsRequest(), 0))) == [b"api-versions-answer"]
    shake = handshake(auth, "PLAIN")
    assert shake.error_code == ErrorCode.NONE
    assert shake.mechanisms == ["PLAIN", "SCRAM-SHA-256"]
    done = authenticate(auth, PlainSaslClient("alice", "alice-secret").initial_response())
    assert done.error_code == ErrorCode.NONE and done.session_lifetime_ms == 0
    assert auth.complete and auth.principal == KafkaPrincipal.user("alice")


def test_scram_exchange_over_authenticate_requests() -> None:
    auth = authenticator()
    handshake(auth, "SCRAM-SHA-256")
    client = ScramSaslClient(SHA256, "bob", "bob-secret")
    first = authenticate(auth, client.initial_response())
    assert not auth.complete
    final = authenticate(auth, client.evaluate(first.auth_bytes))
    client.evaluate(final.auth_bytes)
    assert client.is_complete and auth.principal == KafkaPrincipal.user("bob")


def test_handshake_v0_then_bare_tokens() -> None:
    auth = authenticator()
    handshake(auth, "PLAIN", version=0)
    parts = run(auth.receive(bytearray(b"\0alice\0alice-secret")))
    assert b"".join(parts) == struct.pack(">i", 0)  # an empty challenge, size-prefixed
    assert auth.complete


def test_wrong_password_fails_with_kafkas_message_answered_later() -> None:
    auth = authenticator()
    handshake(auth, "PLAIN")
    request = SaslAuthenticateRequest(auth_bytes=b"\0alice\0wrong")
    with pytest.raises(AuthFailure) as failure:
        run(auth.receive(frame(request, 2)))
    refused = answer(failure.value.answer, request, 2)
    assert refused.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert refused.error_message == "Authentication failed: Invalid username or password"


def test_unknown_scram_user_is_told_only_that_its_credentials_are_invalid() -> None:
    auth = authenticator()
    handshake(auth, "SCRAM-SHA-256")
    request = SaslAuthenticateRequest(
        auth_bytes=ScramSaslClient(SHA256, "mallory", "x").initial_response()
    )
    with pytest.raises(AuthFailure) as failure:
        run(auth.receive(frame(request, 1)))
    assert answer(failure.value.answer, request, 1).error_message == (
        "Authentication failed during authentication due to invalid credentials with SASL "
        "mechanism SCRAM-SHA-256"
    )
    assert "Invalid user credentials" in str(failure.value)  # the log knows why


def test_an_unsupported_mechanism_is_answered_with_the_enabled_ones() -> None:
    auth = authenticator()
    request = SaslHandshakeRequest(mechanism="GSSAPI")
    with pytest.raises(AuthFailure) as failure:
        run(auth.receive(frame(request, 1)))
    refused = answer(failure.value.answer, request, 1)
    assert refused.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert refused.mechanisms == ["PLAIN", "SCRAM-SHA-256"]


def test_a_client_that_skips_the_handshake_is_refused_without_an_answer() -> None:
    with pytest.raises(AuthFailure, match="Unexpected Kafka request of type METADATA") as failure:
        run(authenticator().receive(frame(MetadataRequest(topics=None), 12)))
    assert failure.value.answer is None


def test_a_second_api_versions_after_a_good_one_is_not_answered() -> None:
    auth = authenticator()
    run(auth.receive(frame(ApiVersionsRequest(), 0)))
    with pytest.raises(Exception, match="Unexpected ApiVersions request"):
        run(auth.receive(frame(ApiVersionsRequest(), 0)))


def test_a_request_other_than_authenticate_after_the_handshake_gets_its_error_answer() -> None:
    auth = authenticator()
    handshake(auth, "PLAIN")
    request = MetadataRequest(topics=[MetadataRequestTopic(name="t")])
    with pytest.raises(AuthFailure, match="during SASL authentication") as failure:
        run(auth.receive(frame(request, 12)))
    refused = answer(failure.value.answer, request, 12)
    assert (refused.cluster_id, refused.controller_id) == (None, -1)
    assert [(t.name, t.error_code) for t in refused.topics] == [("t", 34)]  # ILLEGAL_SASL_STATE
    again = SaslHandshakeRequest(mechanism="PLAIN")
    auth = authenticator()
    handshake(auth, "PLAIN")
    with pytest.raises(AuthFailure) as failure:
        run(auth.receive(frame(again, 1)))
    twice = answer(failure.value.answer, again, 1)
    assert (twice.error_code, twice.mechanisms) == (34, [])


def test_a_bare_first_token_is_not_taken_for_gssapi() -> None:
    with pytest.raises(AuthFailure, match="GSSAPI is not supported by server"):
        run(authenticator().receive(bytearray(b"\x60\x82\x01\x00garbage")))


def test_session_lifetime_and_reauthentication() -> None:
    auth = authenticator(reauth_ms=60_000)
    handshake(auth, "PLAIN")
    done = authenticate(auth, PlainSaslClient("alice", "alice-secret").initial_response())
    assert done.session_lifetime_ms == 60_000
    assert auth.session_expiry is not None and not auth.session_expired(0)
    again = frame(SaslHandshakeRequest(mechanism="PLAIN"), 1)
    assert auth.wants_reauthentication(again, 100.0)
    auth.begin_reauthentication(100.0)
    assert answer(run(auth.receive(again)), SaslHandshakeRequest(), 1).error_code == 0
    authenticate(auth, PlainSaslClient("alice", "alice-secret").initial_response())
    assert auth.complete and auth.principal == KafkaPrincipal.user("alice")
    assert not auth.wants_reauthentication(again, 100.5)  # at most one a second
    assert auth.wants_reauthentication(again, 101.0)


def test_reauthentication_may_not_change_the_principal() -> None:
    auth = authenticator(reauth_ms=60_000)
    handshake(auth, "PLAIN")
    authenticate(auth, PlainSaslClient("alice", "alice-secret").initial_response())
    auth.begin_reauthentication(0.0)
    handshake(auth, "PLAIN")
    request = SaslAuthenticateRequest(
        auth_bytes=PlainSaslClient("bob", "bob-secret").initial_response()
    )
    with pytest.raises(AuthFailure) as failure:
        run(auth.receive(frame(request, 2)))
    assert answer(failure.value.answer, request, 2).error_message == (
        "Cannot change principals during re-authentication from User.alice: User.bob"
    )


def test_reauthentication_may_not_change_the_mechanism() -> None:
    auth = authenticator(reauth_ms=60_000)
    handshake(auth, "PLAIN")
    authenticate(auth, PlainSaslClient("alice", "alice-secret").initial_response())
    auth.begin_reauthentication(0.0)
    assert handshake(auth, "SCRAM-SHA-256").error_code == ErrorCode.NONE  # as Kafka
    with pytest.raises(AuthFailure, match="not supported for re-authentication"):
        authenticate(auth, b"anything")


def test_hidden_failures_say_re_authentication_when_re_authenticating() -> None:
    auth = authenticator(reauth_ms=60_000)
    handshake(auth, "SCRAM-SHA-256")
    client = ScramSaslClient(SHA256, "bob", "bob-secret")
    first = authenticate(auth, client.initial_response())
    authenticate(auth, client.evaluate(first.auth_bytes))
    auth.begin_reauthentication(0.0)
    handshake(auth, "SCRAM-SHA-256")
    request = SaslAuthenticateRequest(auth_bytes=b"n,,n=nobody,r=abc")
    with pytest.raises(AuthFailure) as failure:
        run(auth.receive(frame(request, 2)))
    assert "during re-authentication due to invalid credentials" in (
        answer(failure.value.answer, request, 2).error_message
    )


def test_a_session_without_a_lifetime_is_not_reauthenticated() -> None:
    """Its later handshakes go to the handler (ILLEGAL_SASL_STATE), as in Kafka."""
    auth = authenticator()
    handshake(auth, "PLAIN", version=0)
    run(auth.receive(bytearray(b"\0alice\0alice-secret")))
    assert not auth.wants_reauthentication(frame(SaslHandshakeRequest(mechanism="PLAIN"), 1), 9.0)
