"""SASL authentication on the secured pair, step by step, as whole answers.

Each step is one SaslHandshake or SaslAuthenticate (or a request where
neither is due), sent on a connection that is not yet logged in
(``Probe.session`` without a user), with kpybroker's own client sides of
PLAIN and SCRAM making the tokens. After a failure the scenario observes
that the broker closed the connection (``Probe.see_connection``).

A SCRAM server's messages carry its random nonce and a proof over it, so
their ``auth_bytes`` are compared by shape: the server-first message with
the server's part of the nonce left out (the salt and iterations are the
ones ``access.add_scram_user`` set), the server-final one by the client's
check of the server's signature.
"""

from __future__ import annotations

import ssl
from typing import Any

from compat.wire import ConnectionClosed, sasl_client
from kpybroker.protocol.messages import api_versions, metadata, sasl_authenticate, sasl_handshake
from kpybroker.security.sasl.mechanism import SaslAuthenticationError
from kpybroker.security.sasl.scram import ScramSaslClient
from kpybroker.security.sasl.scram_credentials import ScramMechanism

from . import whole
from .access import add_scram_user
from .probe import Probe, error, secured_scenario
from .secured import REAUTH_LISTENER

SASL = "SASL_PLAINTEXT"
#: The client's half of every SCRAM nonce, so the server's first message can be compared.
CLIENT_NONCE = "compatdifferentialnonce"
#: A SCRAM server's messages: its nonce, its signature.
SERVER_TOKEN = ("auth_bytes",)


def handshake(mechanism: str) -> Any:
    return sasl_handshake.SaslHandshakeRequest(mechanism=mechanism)


def token(auth_bytes: bytes) -> Any:
    return sasl_authenticate.SaslAuthenticateRequest(auth_bytes=auth_bytes)


def versions_request() -> Any:
    return api_versions.ApiVersionsRequest(
        client_software_name="compat-differential", client_software_version="1.0"
    )


def all_topics() -> Any:
    return metadata.MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )


def scram(mechanism: str, user: str, password: str) -> ScramSaslClient:
    scram_mechanism = ScramMechanism.for_mechanism_name(mechanism)
    assert scram_mechanism is not None
    return ScramSaslClient(scram_mechanism, user, password, nonce=CLIENT_NONCE)


def server_first_shape(auth_bytes: bytes) -> str:
    """``r=<client nonce><server nonce>,s=...,i=...`` with the server's random part named."""
    text = bytes(auth_bytes).decode("utf-8", "replace")
    fields = text.split(",")
    for index, field in enumerate(fields):
        if field.startswith(f"r={CLIENT_NONCE}") and len(field) > len(CLIENT_NONCE) + 2:
            fields[index] = f"r={CLIENT_NONCE}<server nonce>"
    return ",".join(fields)


def versions_as_on_plaintext(p: Probe, s: Probe, version: int) -> Any:
    """ApiVersions on ``s`` before any SASL step: True when its answer is the one the same
    broker gives on PLAINTEXT (the API ranges themselves are api_versions_ranges' to compare),
    else the fields that differ."""
    request = versions_request()
    answer = s.call_or_closed(request, version)
    if isinstance(answer, str):
        return answer
    where = whole.Where(p.host, p.port)
    mine = whole.flatten(answer, request, version, where)
    plaintext = whole.flatten(p.call(request, version), request, version, where)
    return mine == plaintext or sorted(
        k for k in mine.keys() | plaintext.keys() if mine.get(k) != plaintext.get(k)
    )


def plain_token(user: str, password: str, authorization_id: str = "") -> bytes:
    return f"{authorization_id}\0{user}\0{password}".encode()


def scram_exchange(s: Probe, label: str, client: ScramSaslClient, version: int) -> None:
    """Both SaslAuthenticate steps of a SCRAM login, observed; stops at a refusal."""
    first = s.answer(
        f"{label}/client-first", token(client.initial_response()), version, varies=SERVER_TOKEN
    )
    if first is None or first.error_code:
        return
    s.see(f"{label}/server-first", server_first_shape(first.auth_bytes))
    final_token = client.evaluate(bytes(first.auth_bytes))
    final = s.answer(f"{label}/client-final", token(final_token), version, varies=SERVER_TOKEN)
    if final is None or final.error_code:
        return
    try:
        client.evaluate(bytes(final.auth_bytes))
        verdict: Any = client.is_complete
    except SaslAuthenticationError as exc:
        verdict = str(exc)
    s.see(f"{label}/server signature verified", verdict)


def log_in(s: Probe, mechanism: str, user: str, password: str, version: int = 2) -> None:
    """An unobserved login on a fresh session (the steps under test come after it)."""
    s.conn.authenticate(
        sasl_client(mechanism, user, password), handshake_version=1, authenticate_version=version
    )


@secured_scenario
def api_versions_v5_before_authentication(p: Probe) -> None:
    """ApiVersions v5 naming another cluster (KIP-1242) on SASL_PLAINTEXT: before the
    handshake (Kafka's ``SaslServerAuthenticator`` does not check it), then after logging in
    (its request handler does); one naming a cluster without a node is invalid either way."""
    another, node = "AnotherClusterIdXXXXXX", p.metadata([]).brokers[0].node_id

    def versions(cluster_id: str, node_id: int) -> Any:
        return api_versions.ApiVersionsRequest(
            client_software_name="compat-differential",
            client_software_version="1.0",
            cluster_id=cluster_id,
            node_id=node_id,
        )

    s = p.session(SASL)
    first = s.call(versions(another, node), 5)
    s.see("before/another cluster/error", error(first.error_code))
    s.see("before/another cluster/lists APIs", bool(first.api_keys))
    s.answer("before/another cluster/then SaslHandshake v1 PLAIN", handshake("PLAIN"), 1)
    s = p.session(SASL)
    s.answer("before/cluster id only", versions(another, -1), 5)
    s.see_connection("before/cluster id only/then")
    s = p.session(SASL, "alice")
    s.answer("after login/another cluster", versions(another, node), 5)
    s.answer("after login/cluster id only", versions(another, -1), 5)


@secured_scenario
def sasl_handshake_answers(p: Probe) -> None:
    """ApiVersions before the handshake, SaslHandshake v0 and v1, supported mechanisms or not."""
    for listener in (SASL, REAUTH_LISTENER):
        for v in (0, 3):
            s = p.session(listener)
            label = f"{listener} ApiVersions v{v} first"
            s.see(label, versions_as_on_plaintext(p, s, v))
            s.answer(f"{label}/then SaslHandshake v1 PLAIN", handshake("PLAIN"), 1)
            plain = token(plain_token("alice", "alice-secret"))
            s.answer(f"{label}/then SaslAuthenticate v2", plain, 2)
            s.see_connection(f"{label}/then")
    s = p.session(SASL)
    s.call(versions_request(), 3)
    s.see_connection("ApiVersions twice")

    for v in (0, 1):
        for mechanism in ("PLAIN", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI", "plain", ""):
            s = p.session(SASL)
            label = f"SaslHandshake v{v} {mechanism or 'empty'}"
            s.answer(label, handshake(mechanism), v)
            s.see_connection(f"{label}/then ApiVersions")
    s = p.session(REAUTH_LISTENER)
    s.answer(f"{REAUTH_LISTENER} SaslHandshake v1 SCRAM-SHA-256", handshake("SCRAM-SHA-256"), 1)

    s = p.session(SASL)
    s.answer("SaslHandshake v0 then bare tokens", handshake("PLAIN"), 0)
    try:
        answer: Any = s.conn.exchange_token(plain_token("alice", "alice-secret")).hex()
    except ConnectionClosed:
        answer = "closed"
    s.see("SaslHandshake v0 then bare tokens/PLAIN token answer", answer)
    s.see_connection("SaslHandshake v0 then bare tokens/then")

    s = p.session(SASL)
    s.answer("SaslHandshake twice/first", handshake("SCRAM-SHA-256"), 1)
    s.answer("SaslHandshake twice/second", handshake("SCRAM-SHA-256"), 1)
    s.see_connection("SaslHandshake twice/then")

    s = p.session(SASL)
    body = b"\x00\x05PLAIN"
    answer = s.raw(17, 2, body, flexible=True)
    s.see("SaslHandshake v2 (no such version)", answer if isinstance(answer, str) else answer.hex())


@secured_scenario
def sasl_authenticate_answers(p: Probe) -> None:
    """SaslAuthenticate v0-v2: PLAIN and SCRAM, good and wrong passwords, unknown users, junk."""
    user = "sasl-auth"
    add_scram_user(p, user)
    password = f"{user}-secret"
    plain_cases = {
        "PLAIN good": plain_token("alice", "alice-secret"),
        "PLAIN wrong password": plain_token("alice", "bob-secret"),
        "PLAIN unknown user": plain_token("nobody", "alice-secret"),
        "PLAIN empty password": plain_token("alice", ""),
        "PLAIN two tokens": b"alice\0alice-secret",
        "PLAIN other authorization id": plain_token("alice", "alice-secret", "bob"),
        "PLAIN same authorization id": plain_token("alice", "alice-secret", "alice"),
    }
    for v in (0, 1, 2):
        for label, auth_bytes in plain_cases.items():
            s = p.session(SASL)
            s.call(handshake("PLAIN"), 1)
            s.answer(f"v{v}/{label}", token(auth_bytes), v)
            s.see_connection(f"v{v}/{label}/then")
        scram_cases = {
            "SCRAM-SHA-256 good": scram("SCRAM-SHA-256", user, password),
            "SCRAM-SHA-512 good": scram("SCRAM-SHA-512", user, password),
            "SCRAM-SHA-256 wrong password": scram("SCRAM-SHA-256", user, "wrong"),
            "SCRAM-SHA-512 unknown user": scram("SCRAM-SHA-512", "nobody", password),
            "SCRAM-SHA-256 PLAIN-only user": scram("SCRAM-SHA-256", "bob", "bob-secret"),
        }
        for label, client in scram_cases.items():
            s = p.session(SASL)
            s.call(handshake(client.mechanism), 1)
            scram_exchange(s, f"v{v}/{label}", client, v)
            s.see_connection(f"v{v}/{label}/then")
        for label, auth_bytes in (
            ("SCRAM malformed client-first", b"n,,garbage"),
            ("SCRAM client-first without nonce", f"n,,n={user}".encode()),
            ("SCRAM tokenauth client-first", f"n,,n={user},r=abc,tokenauth=true".encode()),
        ):
            s = p.session(SASL)
            s.call(handshake("SCRAM-SHA-256"), 1)
            s.answer(f"v{v}/{label}", token(auth_bytes), v)
            s.see_connection(f"v{v}/{label}/then")
    s = p.session(SASL)
    s.call(handshake("PLAIN"), 0)
    try:
        answer: Any = s.conn.exchange_token(plain_token("alice", "wrong")).hex()
    except ConnectionClosed:
        answer = "closed"
    s.see("bare token PLAIN wrong password", answer)


@secured_scenario
def sasl_state_answers(p: Probe) -> None:
    """Requests out of turn: before the handshake, instead of a token, after the login."""
    s = p.session(SASL)
    s.answer("Metadata v12 first", all_topics(), 12)
    s = p.session(SASL)
    s.call(versions_request(), 3)
    s.answer("Metadata v1 after ApiVersions", all_topics(), 1)
    s = p.session(SASL)
    s.call(handshake("PLAIN"), 1)
    s.answer("Metadata v12 instead of SaslAuthenticate", all_topics(), 12)
    s.see_connection("Metadata v12 instead of SaslAuthenticate/then")

    # Kafka re-authenticates only sessions that expire (connections.max.reauth.ms, set on
    # SASL_SSL only); elsewhere a SaslHandshake after the login is out of turn.
    for listener in (SASL, REAUTH_LISTENER):
        for v in (0, 1, 2):
            s = p.session(listener)
            log_in(s, "PLAIN", "alice", "alice-secret", v)
            label = f"{listener} logged in with v{v}"
            s.answer(
                f"{label}/SaslAuthenticate v{v}", token(plain_token("alice", "alice-secret")), v
            )
            s.answer(f"{label}/SaslHandshake v1", handshake("PLAIN"), 1)
            s.see_connection(f"{label}/then")

        label = f"{listener} reauthenticate"
        s = p.session(listener)
        log_in(s, "PLAIN", "alice", "alice-secret")
        s.answer(f"{label}/SaslHandshake v1", handshake("PLAIN"), 1)
        s.answer(f"{label}/SaslAuthenticate v2", token(plain_token("alice", "alice-secret")), 2)
        s.see_connection(f"{label}/then")

        label = f"{listener} reauthenticate as bob"
        s = p.session(listener)
        log_in(s, "PLAIN", "alice", "alice-secret")
        s.answer(f"{label}/SaslHandshake v1", handshake("PLAIN"), 1)
        s.answer(f"{label}/SaslAuthenticate v2", token(plain_token("bob", "bob-secret")), 2)
        s.see_connection(f"{label}/then")

        label = f"{listener} reauthenticate with SCRAM"
        s = p.session(listener)
        log_in(s, "PLAIN", "alice", "alice-secret")
        s.answer(f"{label}/SaslHandshake v1", handshake("SCRAM-SHA-256"), 1)
        client = scram("SCRAM-SHA-256", "alice", "alice-secret")
        first = token(client.initial_response())
        s.answer(f"{label}/SaslAuthenticate v2", first, 2, varies=SERVER_TOKEN)
        s.see_connection(f"{label}/then")

    for label, session in (("PLAINTEXT", p), ("SSL as alice", p.session("SSL", "alice"))):
        for v in (0, 1):
            session.answer(f"{label}/SaslHandshake v{v}", handshake("PLAIN"), v)
        for v in (0, 1, 2):
            plain = token(plain_token("alice", "alice-secret"))
            session.answer(f"{label}/SaslAuthenticate v{v}", plain, v)
        session.see_connection(f"{label}/then")

    try:
        p.session("SSL").see_connection("SSL without a client certificate")
    except ssl.SSLError as exc:
        p.see("SSL without a client certificate", f"TLS handshake refused: {exc.reason}")


@secured_scenario
def sasl_session_lifetime(p: Probe) -> None:
    """session_lifetime_ms where connections.max.reauth.ms is set (SASL_SSL) and not."""
    user = "sasl-life"
    add_scram_user(p, user)
    for listener in (REAUTH_LISTENER, SASL):
        for v in (0, 1, 2):
            s = p.session(listener)
            s.call(handshake("PLAIN"), 1)
            s.answer(f"{listener} v{v} PLAIN", token(plain_token("bob", "bob-secret")), v)
            s = p.session(listener)
            s.call(handshake("SCRAM-SHA-512"), 1)
            client = scram("SCRAM-SHA-512", user, f"{user}-secret")
            scram_exchange(s, f"{listener} v{v} SCRAM-SHA-512", client, v)
        s = p.session(listener)
        log_in(s, "PLAIN", "bob", "bob-secret")
        s.call(handshake("PLAIN"), 1)
        s.answer(f"{listener} reauthenticated", token(plain_token("bob", "bob-secret")), 2)
