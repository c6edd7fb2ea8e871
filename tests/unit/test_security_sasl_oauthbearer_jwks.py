"""Signed OAuth tokens checked against a JWKS (Kafka's broker validator).

Tokens are made here with PyJWT and keys from ``cryptography``; the key set is served from a
file, and from a local HTTP or HTTPS server in a thread (loopback only).
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import hashlib
import hmac
import http.server
import ipaddress
import json
import os
import ssl
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from kpybroker.config import BrokerConfig
from kpybroker.config.core import ConfigError
from kpybroker.security.sasl.jwks import JwksSettings, JwksTokenValidator
from kpybroker.security.sasl.jwks_keys import (
    JsonWebKeySet,
    JwksUnavailableError,
    NoVerificationKeyError,
    RefreshingHttpsJwks,
)
from kpybroker.security.sasl.mechanism import SaslAuthenticationError
from kpybroker.security.sasl.oauthbearer import (
    ClientInitialResponse,
    OAuthBearerSaslServer,
    OAuthBearerToken,
    TokenValidationError,
)

ISSUER = "https://idp.example.com"
AUDIENCE = "kafka-cluster"


@dataclass(frozen=True)
class SigningKey:
    kid: str
    alg: str
    private: Any

    def jwk(self) -> dict[str, Any]:
        algorithm = jwt.get_algorithm_by_name(self.alg)
        jwk: dict[str, Any] = json.loads(algorithm.to_jwk(self.private.public_key()))
        return {**jwk, "kid": self.kid, "use": "sig"}

    def sign(self, claims: dict[str, Any]) -> str:
        """A JWS of ``claims`` as given (``jwt.encode`` would refuse some we want to send)."""
        payload = json.dumps(claims).encode()
        return jwt.api_jws.encode(payload, self.private, self.alg, headers={"kid": self.kid})


@pytest.fixture(scope="module")
def rsa_key() -> SigningKey:
    return SigningKey("rsa-1", "RS256", rsa.generate_private_key(65537, 2048))


@pytest.fixture(scope="module")
def ec_key() -> SigningKey:
    return SigningKey("ec-1", "ES256", ec.generate_private_key(ec.SECP256R1()))


@pytest.fixture(scope="module")
def rotated_key() -> SigningKey:
    return SigningKey("rsa-2", "RS256", rsa.generate_private_key(65537, 2048))


def claims(**overrides: Any) -> dict[str, Any]:
    now = int(time.time())
    base = {"sub": "alice", "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 3600}
    return {k: v for k, v in {**base, **overrides}.items() if v is not None}


def jwks_document(*keys: SigningKey) -> bytes:
    return json.dumps({"keys": [key.jwk() for key in keys]}).encode()


def write_jwks(path: Path, *keys: SigningKey) -> None:
    """Writes the set and moves the file's modification time on, as a new file would."""
    stamp = path.stat().st_mtime_ns + 1_000_000_000 if path.exists() else time.time_ns()
    path.write_bytes(jwks_document(*keys))
    os.utime(path, ns=(stamp, stamp))


def settings(url: str, **overrides: Any) -> JwksSettings:
    """The JWKS at ``url``, our audience and issuer, no retries unless overridden."""
    defaults = {
        "jwks_endpoint_url": url,
        "expected_audience": (AUDIENCE,),
        "expected_issuer": ISSUER,
        "jwks_endpoint_retry_backoff_ms": 0,
        "jwks_endpoint_retry_backoff_max_ms": 0,
    }
    return JwksSettings(**{**defaults, **overrides})


@asynccontextmanager
async def started(
    config: JwksSettings, ssl_context: ssl.SSLContext | None = None
) -> AsyncIterator[JwksTokenValidator]:
    validator = JwksTokenValidator(config, ssl_context=ssl_context)
    await validator.start()
    try:
        yield validator
    finally:
        await validator.close()


def validate_once(config: JwksSettings, token: str) -> OAuthBearerToken:
    async def scenario() -> OAuthBearerToken:
        async with started(config) as validator:
            return await validator.validate(token)

    return asyncio.run(scenario())


def rejection(config: JwksSettings, token: str) -> str:
    with pytest.raises(TokenValidationError) as e:
        validate_once(config, token)
    assert e.value.json_error() == '{"status":"invalid_token"}'
    return str(e.value)


@pytest.fixture
def jwks_file(tmp_path: Path, rsa_key: SigningKey, ec_key: SigningKey) -> Path:
    path = tmp_path / "jwks.json"
    write_jwks(path, rsa_key, ec_key)
    return path


@pytest.fixture
def file_settings(jwks_file: Path) -> JwksSettings:
    return settings(jwks_file.as_uri())


# ------------------------------------------------------------------ tokens


def test_an_rs256_token_gives_principal_scope_and_times(
    file_settings: JwksSettings, rsa_key: SigningKey
) -> None:
    token = rsa_key.sign(claims(sub=" alice ", scope="read write", iat=1_700_000_000))
    accepted = validate_once(file_settings, token)
    payload = jwt.decode(token, options={"verify_signature": False})
    assert accepted == OAuthBearerToken(
        token, "alice", frozenset({"read write"}), payload["exp"] * 1000, 1_700_000_000_000
    )


def test_an_es256_token_and_a_scope_list(file_settings: JwksSettings, ec_key: SigningKey) -> None:
    accepted = validate_once(file_settings, ec_key.sign(claims(scope=[" a", "b "])))
    assert (accepted.principal_name, accepted.scope) == ("alice", {"a", "b"})


def test_the_claim_name_settings(file_settings: JwksSettings, rsa_key: SigningKey) -> None:
    config = replace(file_settings, sub_claim_name="client_id", scope_claim_name="scp")
    token = rsa_key.sign(claims(sub=None, client_id="svc", scp="x"))
    accepted = validate_once(config, token)
    assert (accepted.principal_name, accepted.scope) == ("svc", {"x"})
    assert rejection(config, rsa_key.sign(claims(client_id=7))) == (
        "Could not extract the 'client_id' claim from the access token"
    )


def test_times_allow_the_clock_skew(file_settings: JwksSettings, rsa_key: SigningKey) -> None:
    now = int(time.time())
    hour_ago = now - 3600
    assert validate_once(file_settings, rsa_key.sign(claims(iat=hour_ago, exp=now - 5)))
    assert "Signature has expired" in rejection(
        file_settings, rsa_key.sign(claims(iat=hour_ago, exp=now - 300))
    )
    assert validate_once(file_settings, rsa_key.sign(claims(nbf=now + 5)))
    assert "not yet valid" in rejection(file_settings, rsa_key.sign(claims(nbf=now + 300)))
    # as jose4j, an issue time in the future is no reason to refuse, an end before it is
    assert validate_once(file_settings, rsa_key.sign(claims(iat=now + 300)))
    assert "cannot be before the Issued At" in rejection(
        file_settings, rsa_key.sign(claims(iat=now, exp=now - 1))
    )
    assert "cannot be before the Not Before" in rejection(
        file_settings, rsa_key.sign(claims(nbf=now + 20, exp=now + 10))
    )


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"exp": None}, 'Token is missing the "exp" claim'),
        ({"iat": None}, 'Token is missing the "iat" claim'),
        ({"iss": "https://evil.example.com"}, "Invalid issuer"),
        ({"iss": None}, 'Token is missing the "iss" claim'),
        ({"aud": "someone-else"}, "Audience doesn't match"),
        ({"aud": None}, 'Token is missing the "aud" claim'),
        ({"sub": None}, "sub value must be non-null"),
        ({"sub": ""}, "sub value must be non-empty"),
        ({"sub": "  "}, "sub value must not contain only whitespace"),
        ({"sub": 5}, "Subject must be a string"),
        ({"jti": 5}, "JWT ID must be a string"),
        ({"nbf": "1"}, "The value of the 'nbf' claim is not the expected type"),
        ({"scope": ["a", " a"]}, "scope value must not contain duplicates - a already present"),
        ({"scope": ["a", None]}, "scope value must be non-null"),
        ({"exp": "never"}, "Expiration Time claim (exp) must be an integer."),
        ({"iat": "x"}, "The value of the 'iat' claim is not the expected type"),
        ({"iat": -5}, 'iat value must be null or non-negative; value given was "-5000"'),
    ],
)
def test_claims_kafka_rejects(
    file_settings: JwksSettings, rsa_key: SigningKey, overrides: dict[str, Any], reason: str
) -> None:
    assert reason in rejection(file_settings, rsa_key.sign(claims(**overrides)))


def test_any_expected_audience_will_do(file_settings: JwksSettings, rsa_key: SigningKey) -> None:
    config = replace(file_settings, expected_audience=("other", AUDIENCE))
    assert validate_once(config, rsa_key.sign(claims(aud=["x", AUDIENCE])))


def test_unverified_audience_and_issuer_when_allowed(
    file_settings: JwksSettings, rsa_key: SigningKey
) -> None:
    config = replace(
        file_settings,
        expected_audience=(),
        expected_issuer=None,
        allow_unverified_audience=True,
        allow_unverified_issuer=True,
    )
    assert validate_once(config, rsa_key.sign(claims(aud="anyone", iss=None)))
    assert "'iss' claim is not the expected type" in rejection(config, rsa_key.sign(claims(iss=1)))


def test_signatures_and_algorithms(
    file_settings: JwksSettings, rsa_key: SigningKey, rotated_key: SigningKey
) -> None:
    forged = SigningKey(rsa_key.kid, "RS256", rotated_key.private).sign(claims())
    assert "Signature verification failed" in rejection(file_settings, forged)
    unsigned = jwt.encode(claims(), None, algorithm="none")
    assert rejection(file_settings, unsigned).startswith("Malformed JWT provided")
    assert "'none' is not allowed" in rejection(file_settings, unsigned + "c2ln")
    # an HMAC token keyed with the RSA public key must find no key, not verify
    public_pem = rsa_key.private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    confused = hmac_token(public_pem, {"alg": "HS256", "kid": rsa_key.kid}, claims())
    assert "Unable to find a suitable verification key" in rejection(file_settings, confused)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def hmac_token(secret: bytes, header: dict[str, Any], payload: dict[str, Any]) -> str:
    """An HS256 token signed with any bytes (PyJWT will not take a PEM key as a secret)."""
    signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(payload).encode())}"
    signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{b64(signature)}"


def test_an_hmac_key_in_the_set_verifies_hs256_tokens_of_its_size(tmp_path: Path) -> None:
    path = tmp_path / "oct.json"
    secret = b"k" * 32
    path.write_text(json.dumps({"keys": [{"kty": "oct", "kid": "h", "k": b64(secret)}]}))
    config = settings(path.as_uri())
    assert validate_once(config, hmac_token(secret, {"alg": "HS256", "kid": "h"}, claims()))
    short = tmp_path / "short.json"
    short.write_text(json.dumps({"keys": [{"kty": "oct", "kid": "h", "k": b64(b"k" * 8)}]}))
    token = hmac_token(b"k" * 8, {"alg": "HS256", "kid": "h"}, claims())
    assert "below the minimum recommended length" in rejection(settings(short.as_uri()), token)


@pytest.mark.parametrize("token", ["abc", "a.b", "a.b.c.d", "a..c", "a.b.", " . . "])
def test_malformed_tokens(file_settings: JwksSettings, token: str) -> None:
    assert rejection(file_settings, token) == (
        "Malformed JWT provided; expected three sections (header, payload, and signature)"
    )


def test_a_token_that_is_not_a_jws(file_settings: JwksSettings) -> None:
    assert rejection(file_settings, "x.y.z").startswith("Could not validate the access token: ")


# ------------------------------------------------------------------ choosing the key


def test_the_key_is_chosen_by_kid_type_curve_use_operations_and_alg(
    rsa_key: SigningKey, ec_key: SigningKey
) -> None:
    rsa_jwk, ec_jwk = rsa_key.jwk(), ec_key.jwk()
    keys = JsonWebKeySet(
        [
            {**rsa_jwk, "kid": "enc", "use": "enc"},
            {**rsa_jwk, "kid": "ops", "key_ops": ["encrypt"]},
            {**rsa_jwk, "kid": "ps", "alg": "PS256"},
            {**ec_jwk, "kid": "p384", "crv": "P-384"},
            {"kty": "RSA", "kid": "broken", "n": "!", "e": "AQAB"},
            {"kty": "XYZ", "kid": "unknown"},
            rsa_jwk,
            ec_jwk,
        ]
    )
    for kid in ("enc", "ops", "ps", "p384", "broken", "unknown"):
        assert keys.select({"alg": "RS256", "kid": kid}) is None
    assert keys.select({"alg": "PS256", "kid": "ps"}) is not None
    assert keys.select({"alg": "ES256", "kid": "p384"}) is None
    chosen = keys.select({"alg": "ES256"})  # no kid: the first key that fits
    assert chosen is not None and chosen.key_id == ec_key.kid
    assert keys.select({"alg": "RS256", "kid": rsa_key.kid}) is not None
    assert keys.key_ids == {
        "enc",
        "ops",
        "ps",
        "p384",
        "broken",
        "unknown",
        rsa_key.kid,
        ec_key.kid,
    }


def test_a_document_without_keys_is_no_jwks() -> None:
    with pytest.raises(ValueError, match="does not include the keys member"):
        JsonWebKeySet.parse(b'{"key": []}')


def test_a_replaced_jwks_file_is_read_again(
    jwks_file: Path, rsa_key: SigningKey, rotated_key: SigningKey
) -> None:
    async def scenario() -> None:
        async with started(settings(jwks_file.as_uri())) as validator:
            new_token = rotated_key.sign(claims())
            with pytest.raises(TokenValidationError, match="Unable to find a suitable"):
                await validator.validate(new_token)
            write_jwks(jwks_file, rotated_key)
            assert (await validator.validate(new_token)).principal_name == "alice"
            with pytest.raises(TokenValidationError, match="Unable to find a suitable"):
                await validator.validate(rsa_key.sign(claims()))
            jwks_file.write_text("not json")
            with pytest.raises(TokenValidationError, match="Could not read the JWKS file"):
                await validator.validate(new_token)

    asyncio.run(scenario())


# ------------------------------------------------------------------ fetched over HTTP(S)


class JwksServer:
    """Serves a JWKS on loopback from a thread; the document and status can change."""

    def __init__(self, document: bytes, tls: ssl.SSLContext | None = None) -> None:
        self.document = document
        self.status = 200
        self.failures_to_come = 0  # answered 503 whatever the status
        self.requests = 0
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.requests += 1
                failing = server.failures_to_come > 0
                server.failures_to_come -= failing
                self.send_response(503 if failing else server.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(server.document)))
                self.end_headers()
                self.wfile.write(server.document)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()
        scheme = "https" if tls is not None else "http"
        self.url = f"{scheme}://127.0.0.1:{self.httpd.server_address[1]}/keys"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


@pytest.fixture
def jwks_server(rsa_key: SigningKey) -> Iterator[JwksServer]:
    server = JwksServer(jwks_document(rsa_key))
    yield server
    server.close()


async def wait_for(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(60):  # a safety net for a broken build, not a measurement
        while not condition():
            await asyncio.sleep(0.01)


def test_an_unknown_kid_refreshes_the_set_at_once_and_picks_up_the_rotated_key(
    jwks_server: JwksServer, rsa_key: SigningKey, rotated_key: SigningKey
) -> None:
    async def scenario() -> None:
        async with started(settings(jwks_server.url)) as validator:
            assert (await validator.validate(rsa_key.sign(claims()))).principal_name == "alice"
            assert jwks_server.requests == 1
            jwks_server.document = jwks_document(rsa_key, rotated_key)
            accepted = await validator.validate(rotated_key.sign(claims(sub="bob")))
            assert accepted.principal_name == "bob"
            assert jwks_server.requests == 2
            # a kid still unknown after its refresh is not fetched for again at once
            stranger = SigningKey("rsa-3", "RS256", rotated_key.private).sign(claims())
            for expected_requests in (3, 3):
                with pytest.raises(TokenValidationError, match="Unable to find a suitable"):
                    await validator.validate(stranger)
                assert jwks_server.requests == expected_requests

    asyncio.run(scenario())


def test_concurrent_tokens_with_a_new_kid_share_one_refresh(
    jwks_server: JwksServer, rsa_key: SigningKey, rotated_key: SigningKey
) -> None:
    async def scenario() -> None:
        async with started(settings(jwks_server.url)) as validator:
            jwks_server.document = jwks_document(rsa_key, rotated_key)
            token = rotated_key.sign(claims())
            results = await asyncio.gather(*(validator.validate(token) for _ in range(5)))
            assert {r.principal_name for r in results} == {"alice"}
            assert jwks_server.requests == 2

    asyncio.run(scenario())


def test_a_missing_kid_is_fetched_for_again_after_a_minute(rsa_key: SigningKey) -> None:
    server = JwksServer(jwks_document(rsa_key))
    now = [0.0]
    jwks = RefreshingHttpsJwks(
        server.url,
        refresh_ms=3_600_000,
        retry_backoff_ms=0,
        retry_backoff_max_ms=0,
        clock=lambda: now[0],
    )

    async def scenario() -> None:
        await jwks.start()
        try:
            header = {"alg": "RS256", "kid": "later"}
            for seconds, expected_requests in ((0, 2), (59.9, 2), (60, 3), (61, 3)):
                now[0] = seconds
                with pytest.raises(NoVerificationKeyError):
                    await jwks.key_for(header)
                assert server.requests == expected_requests
        finally:
            await jwks.close()

    try:
        asyncio.run(scenario())
    finally:
        server.close()


def test_the_set_is_refreshed_in_the_background_and_kept_when_a_refresh_fails(
    jwks_server: JwksServer, rsa_key: SigningKey, rotated_key: SigningKey
) -> None:
    async def scenario() -> None:
        async with started(settings(jwks_server.url, jwks_endpoint_refresh_ms=20)) as validator:
            jwks_server.status = 500
            await wait_for(lambda: jwks_server.requests >= 3)
            assert (await validator.validate(rsa_key.sign(claims()))).principal_name == "alice"
            jwks_server.status = 200
            jwks_server.document = jwks_document(rotated_key)
            seen = jwks_server.requests
            await wait_for(lambda: jwks_server.requests >= seen + 2)
            with pytest.raises(TokenValidationError, match="Unable to find a suitable"):
                await validator.validate(rsa_key.sign(claims()))

    asyncio.run(scenario())


def test_start_fails_when_the_set_cannot_be_fetched(jwks_server: JwksServer) -> None:
    async def start(config: JwksSettings) -> None:
        async with started(config):
            pass

    jwks_server.status = 404
    with pytest.raises(JwksUnavailableError, match="HTTP Error 404"):
        asyncio.run(start(settings(jwks_server.url)))
    jwks_server.status = 200
    jwks_server.document = b"{}"
    with pytest.raises(JwksUnavailableError, match="does not include the keys member"):
        asyncio.run(start(settings(jwks_server.url)))


def test_a_failed_fetch_is_retried_with_backoff(
    jwks_server: JwksServer, rsa_key: SigningKey
) -> None:
    async def scenario() -> None:
        config = settings(
            jwks_server.url,
            jwks_endpoint_retry_backoff_ms=1,
            jwks_endpoint_retry_backoff_max_ms=10_000,
        )
        async with started(config) as validator:
            assert (await validator.validate(rsa_key.sign(claims()))).principal_name == "alice"

    jwks_server.failures_to_come = 2
    asyncio.run(scenario())
    assert jwks_server.requests == 3


@pytest.fixture(scope="module")
def tls_material(tmp_path_factory: pytest.TempPathFactory) -> tuple[ssl.SSLContext, bytes]:
    """A server context with a self-signed certificate for 127.0.0.1, and that certificate."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    directory = tmp_path_factory.mktemp("tls")
    cert_pem = certificate.public_bytes(serialization.Encoding.PEM)
    (directory / "cert.pem").write_bytes(cert_pem)
    (directory / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(directory / "cert.pem", directory / "key.pem")
    return context, cert_pem


def test_https_is_verified_against_the_configured_trust(
    tls_material: tuple[ssl.SSLContext, bytes], rsa_key: SigningKey
) -> None:
    server_context, cert_pem = tls_material
    server = JwksServer(jwks_document(rsa_key), tls=server_context)

    async def scenario() -> None:
        trusted = ssl.create_default_context(cadata=cert_pem.decode())
        async with started(settings(server.url), ssl_context=trusted) as validator:
            assert (await validator.validate(rsa_key.sign(claims()))).principal_name == "alice"
        with pytest.raises(JwksUnavailableError, match="CERTIFICATE_VERIFY_FAILED"):
            async with started(settings(server.url)):  # the system's trust store
                pass

    try:
        asyncio.run(scenario())
    finally:
        server.close()


# ------------------------------------------------------------------ the exchange


def test_the_full_sasl_exchange_with_a_signed_token(jwks_file: Path, rsa_key: SigningKey) -> None:
    async def scenario() -> None:
        async with started(settings(jwks_file.as_uri())) as validator:
            good = rsa_key.sign(claims(exp=2_000_000_000))
            server = OAuthBearerSaslServer(validator)
            assert await server.evaluate(ClientInitialResponse(good).to_bytes()) == b""
            assert (server.authorization_id, server.credential_expiry_ms) == (
                "alice",
                2_000_000_000_000,
            )
            server = OAuthBearerSaslServer(validator)
            bad = rsa_key.sign(claims(aud="elsewhere"))
            challenge = await server.evaluate(ClientInitialResponse(bad).to_bytes())
            assert challenge == b'{"status":"invalid_token"}'
            with pytest.raises(SaslAuthenticationError, match=r'^\{"status":"invalid_token"\}$'):
                await server.evaluate(b"\x01")

    asyncio.run(scenario())


# ------------------------------------------------------------------ settings


def test_settings_read_from_the_broker_config_with_the_tables_defaults() -> None:
    config = BrokerConfig(
        {
            "sasl.oauthbearer.jwks.endpoint.url": "https://idp/keys",
            "sasl.oauthbearer.expected.audience": "a,b",
        }
    )
    read = JwksSettings.from_config(config.get)
    assert read == JwksSettings(
        jwks_endpoint_url="https://idp/keys",
        jwks_endpoint_refresh_ms=3_600_000,
        jwks_endpoint_retry_backoff_ms=100,
        jwks_endpoint_retry_backoff_max_ms=10_000,
        expected_audience=("a", "b"),
        expected_issuer=None,
        scope_claim_name="scope",
        sub_claim_name="sub",
        clock_skew_seconds=30,
        allow_unverified_audience=False,
        allow_unverified_issuer=False,
    )


@pytest.mark.parametrize(
    ("overrides", "key", "message"),
    [
        (
            {"expected_audience": ()},
            "sasl.oauthbearer.expected.audience",
            'The OAuth validator for the broker requires "sasl.oauthbearer.expected.audience" to '
            'be configured so that the token\'s audience ("aud") claim can be verified, but it '
            'was not set. Set "sasl.oauthbearer.expected.audience" to the audience(s) that '
            'identify this cluster, or set "sasl.oauthbearer.allow.unverified.audience" to true '
            "to accept tokens regardless of their audience.",
        ),
        (
            {"expected_issuer": " "},
            "sasl.oauthbearer.expected.issuer",
            'The OAuth validator for the broker requires "sasl.oauthbearer.expected.issuer" to be '
            'configured so that the token\'s issuer ("iss") claim can be verified, but it was '
            'not set. Set "sasl.oauthbearer.expected.issuer" to the issuer URL of the OAuth/OIDC '
            'provider that signs the tokens, or set "sasl.oauthbearer.allow.unverified.issuer" '
            "to true to accept tokens regardless of their issuer.",
        ),
        (
            {"jwks_endpoint_url": None},
            "sasl.oauthbearer.jwks.endpoint.url",
            "The OAuth configuration option sasl.oauthbearer.jwks.endpoint.url value is required",
        ),
        (
            {"jwks_endpoint_url": "idp/keys"},
            "sasl.oauthbearer.jwks.endpoint.url",
            "The OAuth configuration option sasl.oauthbearer.jwks.endpoint.url contains a URL "
            "(idp/keys) that is malformed: no protocol: idp/keys",
        ),
        (
            {"jwks_endpoint_url": "ftp://idp/keys"},
            "sasl.oauthbearer.jwks.endpoint.url",
            "The OAuth configuration option sasl.oauthbearer.jwks.endpoint.url contains a URL "
            '(ftp://idp/keys) that contains an invalid protocol (ftp); only "http", "https", '
            'and "file" protocol are supported',
        ),
        (
            {"jwks_endpoint_url": "file:///nonexistent/jwks.json"},
            "sasl.oauthbearer.jwks.endpoint.url",
            "The OAuth configuration option sasl.oauthbearer.jwks.endpoint.url contains a file "
            "(/nonexistent/jwks.json) that doesn't exist",
        ),
        (
            {"jwks_endpoint_url": "file:///tmp"},
            "sasl.oauthbearer.jwks.endpoint.url",
            "The OAuth configuration option sasl.oauthbearer.jwks.endpoint.url references a "
            "directory (/tmp), not a file",
        ),
        (
            {"jwks_endpoint_refresh_ms": 0},
            "sasl.oauthbearer.jwks.endpoint.refresh.ms",
            "JWKS validation key refresh configuration value retryWaitMs value must be positive",
        ),
        (
            {"jwks_endpoint_retry_backoff_ms": 50, "jwks_endpoint_retry_backoff_max_ms": 10},
            "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
            "retryBackoffMaxMs value (10) is less than retryBackoffMs value (50)",
        ),
        (
            {"sub_claim_name": " "},
            "sasl.oauthbearer.sub.claim.name",
            "The OAuth configuration option sasl.oauthbearer.sub.claim.name value is required",
        ),
    ],
)
def test_unusable_settings_fail_construction_with_kafkas_message(
    overrides: dict[str, Any], key: str, message: str
) -> None:
    with pytest.raises(ConfigError) as e:
        JwksTokenValidator(settings("https://idp.example.com/keys", **overrides))
    assert (e.value.key, str(e.value)) == (key, message)
