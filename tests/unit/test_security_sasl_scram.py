"""SASL/SCRAM: credentials and their stored text, the messages, the server and the client.

Vectors: RFC 7677's SCRAM-SHA-256 exchange; credential strings and a SCRAM-SHA-512
exchange made by Kafka 4.4's own ScramFormatter, ScramCredentialUtils, ScramSaslClient
and ScramSaslServer. Ported: Kafka's ScramFormatterTest, ScramMessagesTest,
ScramCredentialUtilsTest and ScramSaslServerTest. Interop: kafka-python's and aiokafka's
SCRAM clients against this server.
"""

from __future__ import annotations

import asyncio
import base64

import pytest
from aiokafka.conn import ScramAuthenticator
from kafka.net.sasl.scram import ScramClient

from kpybroker.security.sasl import scram
from kpybroker.security.sasl.mechanism import (
    InvalidCredentialsError,
    SaslAuthenticationError,
    invalid_credentials_message,
)
from kpybroker.security.sasl.scram import (
    AUTHZID_MISMATCH,
    ScramFailure,
    ScramSaslClient,
    ScramSaslServer,
)
from kpybroker.security.sasl.scram_credentials import (
    ScramCredential,
    ScramMechanism,
    credential_from_string,
    credential_to_string,
    secure_random_string,
)
from kpybroker.security.sasl.scram_messages import (
    ClientFinalMessage,
    ClientFirstMessage,
    ScramMessageError,
    ServerFinalMessage,
    ServerFirstMessage,
    auth_message,
    sasl_name,
    username_from_sasl_name,
)

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512

# RFC 7677 section 3
RFC_PASSWORD = "pencil"
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_C1 = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_S1 = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC_C2 = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_S2 = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="

# Kafka 4.4's ScramSaslClient against its ScramSaslServer: user "a,b=c", password
# "pässwörd", salt "5r3v4w8q1yqg0lq9hprbfzbx4k", 4096 iterations.
KAFKA_CLIENT_NONCE = "51wgtdzck1sy393kzqjndh2am"
KAFKA_SERVER_NONCE = "97qsk669f5h4lolg1cxeuo53w"
KAFKA_C1 = b"n,,n=a=2Cb=3Dc,r=51wgtdzck1sy393kzqjndh2am"
KAFKA_S1 = (
    b"r=51wgtdzck1sy393kzqjndh2am97qsk669f5h4lolg1cxeuo53w,"
    b"s=NXIzdjR3OHExeXFnMGxxOWhwcmJmemJ4NGs=,i=4096"
)
KAFKA_C2 = (
    b"c=biws,r=51wgtdzck1sy393kzqjndh2am97qsk669f5h4lolg1cxeuo53w,"
    b"p=vqc12vu3oAnwBbkAHNOD//xZTCNc1b9a7vw80lgxwSGj2GNMBwqoh5N8F4pOHkiiOHloD2/l37Pw9Q9mH86XPg=="
)
KAFKA_S2 = (
    b"v=1bfljWy5hPTqboePW3x/aWH2wCvyGR0f4LfuRddsBzVHt86SiVvJ77K7yjjZ8T95G14Os+/N6s7DhRKAdFUjhQ=="
)


def evaluate(server: ScramSaslServer, response: bytes) -> bytes:
    return asyncio.run(server.evaluate(response))


def users(mechanism: ScramMechanism, **passwords: str) -> scram.CredentialLookup:
    """A lookup over fresh credentials; it records what it was asked."""
    credentials = {name: mechanism.credential(pw, 4096) for name, pw in passwords.items()}

    def lookup(mechanism_name: str, username: str) -> ScramCredential | None:
        asked.append((mechanism_name, username))
        return credentials.get(username) if mechanism_name == mechanism.mechanism_name else None

    asked: list[tuple[str, str]] = []
    lookup.asked = asked  # type: ignore[attr-defined]
    return lookup


def server_for(mechanism: ScramMechanism = SHA256) -> ScramSaslServer:
    return ScramSaslServer(mechanism, users(mechanism, userA="passwordA", userB="passwordB"))


def run_exchange(client: ScramSaslClient, server: ScramSaslServer) -> None:
    server_first = evaluate(server, client.initial_response())
    server_final = evaluate(server, client.evaluate(server_first))
    assert client.evaluate(server_final) == b""


# --- mechanisms, formulas and credentials -------------------------------------------------


def test_mechanisms() -> None:
    assert [(m.mechanism_name, m.type, m.hash_name) for m in ScramMechanism] == [
        ("SCRAM-SHA-256", 1, "sha256"),
        ("SCRAM-SHA-512", 2, "sha512"),
    ]
    assert (SHA256.min_iterations, SHA256.max_iterations) == (4096, 16384)
    assert (SHA512.min_iterations, SHA512.max_iterations) == (4096, 16384)
    assert ScramMechanism.for_mechanism_name("SCRAM-SHA-512") is SHA512
    assert ScramMechanism.for_mechanism_name("PLAIN") is None
    assert ScramMechanism.from_type(1) is SHA256
    assert ScramMechanism.from_type(3) is None


def test_rfc7677_formulas() -> None:
    """ScramFormatterTest.rfc7677Example."""
    client_first = ClientFirstMessage.parse(RFC_C1)
    server_first = ServerFirstMessage.parse(RFC_S1)
    client_final = ClientFinalMessage.parse(RFC_C2)
    server_final = ServerFinalMessage.parse(RFC_S2)
    assert (client_first.sasl_name, client_first.nonce) == ("user", RFC_CLIENT_NONCE)
    assert server_first.nonce == RFC_CLIENT_NONCE + RFC_SERVER_NONCE
    assert (server_first.salt, server_first.iterations) == (RFC_SALT, 4096)
    assert client_final.channel_binding == b"n,,"

    salted = SHA256.salted_password(RFC_PASSWORD, RFC_SALT, 4096)
    signed = auth_message(client_first, server_first, client_final)
    assert SHA256.client_proof(salted, signed) == client_final.proof
    assert SHA256.server_signature(SHA256.server_key(salted), signed) == (
        server_final.server_signature
    )
    credential = SHA256.credential(RFC_PASSWORD, 4096, salt=RFC_SALT)
    assert SHA256.verify_client_proof(credential.stored_key, signed, client_final.proof)
    assert not SHA256.verify_client_proof(credential.stored_key, signed, bytes(32))
    assert not SHA256.verify_client_proof(credential.stored_key, signed, client_final.proof[:-1])


@pytest.mark.parametrize(
    ("mechanism", "salt", "password", "iterations", "text"),
    [
        (
            SHA256,
            b"4pd9ia0c6v3j0kyw8xf4o4h2tq",
            "alice-secret",
            4096,
            "salt=NHBkOWlhMGM2djNqMGt5dzh4ZjRvNGgydHE=,"
            "stored_key=CWOiS2v/hAFbrPqVH3kMcAKg0fJ8Jv704tsXaqAbANw=,"
            "server_key=ppEffYOcfhgxqmMNBKZYloA/7EdNqzmB2UtP2quKg+U=,iterations=4096",
        ),
        (
            SHA512,
            b"4pd9ia0c6v3j0kyw8xf4o4h2tq",
            "alice-secret",
            8192,
            "salt=NHBkOWlhMGM2djNqMGt5dzh4ZjRvNGgydHE=,"
            "stored_key=OfZEg4PojXjw8s9h45H7HSWVmG3iQTx80mBmLq4deld2O6ZKO5ryaaTPQsifHHbf/iC/MeMY"
            "5Zgo1vRQ4lZ7cQ==,"
            "server_key=AxWhrpAPbB9HxMlIZ5V5qSX6pqGUcg0sAwOvY9MxmrCKH1cFz6THaCc+X+vvKaUvYDOp4Wrp"
            "t54Prtix2ZUxgw==,iterations=8192",
        ),
        (
            SHA256,
            b"1ocbwmdxm3ixf1n7yp2fkwjcdp",
            "pässwörd,=",
            4096,
            "salt=MW9jYndtZHhtM2l4ZjFuN3lwMmZrd2pjZHA=,"
            "stored_key=7zN0QMjQcg2EkFgjxVfCON0cOPRIxc/qmLHW8Ctv8P4=,"
            "server_key=cFpHSpu17GLm4uRNIXFdnySgg84QaU3aFLcjlSvstvk=,iterations=4096",
        ),
    ],
)
def test_credential_text_as_kafka_writes_it(
    mechanism: ScramMechanism, salt: bytes, password: str, iterations: int, text: str
) -> None:
    """Expected strings from Kafka 4.4's ScramFormatter.generateCredential and
    ScramCredentialUtils.credentialToString for the same salt and password."""
    credential = mechanism.credential(password, iterations, salt=salt)
    assert credential_to_string(credential) == text
    assert credential_from_string(text) == credential
    salted = mechanism.salted_password(password, salt, iterations)
    assert mechanism.credential_from_salted_password(salt, salted, iterations) == credential


def test_credential_round_trip_and_fresh_salts() -> None:
    """ScramCredentialUtilsTest.stringConversion and generateCredential."""
    credential = SHA256.credential("password", 1024)
    assert credential.salt and credential.stored_key and credential.server_key
    assert credential_from_string(credential_to_string(credential)) == credential
    assert credential_to_string(SHA256.credential("password", 4096)) != credential_to_string(
        SHA256.credential("password", 4096)
    )


def test_salts_and_nonces_are_kafkas_base36_strings() -> None:
    for _ in range(50):
        value = secure_random_string()
        assert 0 < len(value) <= 26
        assert int(value, 36) < 2**130
        assert value == value.lower()


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        (
            "salt=QQ,stored_key=QR==,server_key=,iterations=+5",
            ScramCredential(b"A", b"A", b"", 5),
        ),
        (  # any order, a repeated field's last value, a trailing comma
            "iterations=0012,server_key=QUJD,stored_key=QUI,salt=x,salt=QQ==,",
            ScramCredential(b"A", b"AB", b"ABC", 12),
        ),
    ],
)
def test_credential_text_that_kafka_also_reads(text: str, parsed: ScramCredential) -> None:
    assert credential_from_string(text) == parsed


@pytest.mark.parametrize(
    "text",
    [
        "abc",
        "",
        ",",
        "salt=QQ,stored_key=QQ,server_key=QQ",
        "salt=QQ,stored_key=QQ,server_key=QQ,iterations=1,a=test",
        "salt=QQ,stored_key=QQ,server_key=QQ,,iterations=1",
        "=x,salt=QQ,stored_key=QQ,server_key=QQ,iterations=1",
        ",salt=QQ,stored_key=QQ,server_key=QQ,iterations=1",
        "salt=QQ=,stored_key=QQ,server_key=QQ,iterations=1",
        "salt=Q,stored_key=QQ,server_key=QQ,iterations=1",
        "salt=QQ==QQ==,stored_key=QQ,server_key=QQ,iterations=1",
        "salt=Q.Q=,stored_key=QQ,server_key=QQ,iterations=1",
        "salt=QQ,stored_key=QQ,server_key=QQ,iterations=2147483648",
        "salt=QQ,stored_key=QQ,server_key=QQ,iterations= 1",
        "salt=QQ,stored_key=QQ,server_key=QQ,iterations=1_0",
    ],
)
def test_credential_text_refused(text: str) -> None:
    with pytest.raises(ValueError) as error:
        credential_from_string(text)
    assert str(error.value) == f"Credentials not valid: {text}"


# --- messages (ScramMessagesTest) ---------------------------------------------------------

VALID_EXTENSIONS = [
    "ext=val1",
    "anotherext=name1=value1 name2=another test value \"'!$[]()",
    "first=val1,second=name1 = value ,third=123",
]
INVALID_EXTENSIONS = ["ext1=value", "ext", "ext=value1,value2", "ext=,", "ext =value"]
VALID_RESERVED = ["m=reserved-value", "m=name1=value1 name2=another test value \"'!$[]()"]
INVALID_RESERVED = ["m", "m=name,value", "m=,"]
#: A nonce as secure_random_string makes them, fixed so that test ids are the same in every
#: process (pytest-xdist's workers collect the tests apart).
NONCE = "1f0nfhj8m469z4pope4ekq8qs6"
SALT = base64.b64encode(b"some salt").decode()
PROOF = base64.b64encode(bytes(range(32))).decode()


def test_valid_client_first_messages() -> None:
    message = ClientFirstMessage.parse(f"n,,n=testuser,r={NONCE}".encode())
    assert (message.sasl_name, message.nonce, message.authorization_id) == ("testuser", NONCE, "")
    assert ClientFirstMessage.parse(message.to_bytes()) == message
    message = ClientFirstMessage.parse(f"n,a=testauthzid,n=testuser,r={NONCE}".encode())
    assert message.authorization_id == "testauthzid"
    assert ClientFirstMessage.parse(message.to_bytes()) == message
    for reserved in VALID_RESERVED:
        message = ClientFirstMessage.parse(f"n,,{reserved},n=testuser,r={NONCE}".encode())
        assert (message.sasl_name, message.nonce) == ("testuser", NONCE)
        assert message.bare == f"n=testuser,r={NONCE}"  # Kafka drops the reserved field
    for extension in VALID_EXTENSIONS:
        message = ClientFirstMessage.parse(f"n,,n=testuser,r={NONCE},{extension}".encode())
        assert (message.sasl_name, message.nonce) == ("testuser", NONCE)
        assert not message.token_authenticated
    message = ClientFirstMessage.parse(f"n,,n=testuser,r={NONCE},tokenauth=true".encode())
    assert message.token_authenticated
    assert message.extensions == {"tokenauth": "true"}
    assert message.bare == f"n=testuser,r={NONCE},tokenauth=true"


@pytest.mark.parametrize(
    "text",
    [
        f"n,x=something,n=testuser,r={NONCE}",
        f"y,,n=testuser,r={NONCE}",
        f"n,,n=test,user,r={NONCE}",
        f"n,,n=testuser,r={NONCE},",
        *(f"n,,{reserved},n=testuser,r={NONCE}" for reserved in INVALID_RESERVED),
        *(f"n,,n=testuser,r={NONCE},{extension}" for extension in INVALID_EXTENSIONS),
    ],
)
def test_invalid_client_first_messages(text: str) -> None:
    with pytest.raises(ScramMessageError) as error:
        ClientFirstMessage.parse(text.encode())
    assert str(error.value) == f"Invalid SCRAM client first message format: {text}"


def test_valid_server_first_messages() -> None:
    message = ServerFirstMessage(NONCE, b"some salt", 8192)
    assert ServerFirstMessage.parse(message.to_bytes()) == message
    for text in (
        f"r={NONCE},s={SALT},i=4096",
        *(f"{reserved},r={NONCE},s={SALT},i=4096" for reserved in VALID_RESERVED),
        *(f"r={NONCE},s={SALT},i=4096,{extension}" for extension in VALID_EXTENSIONS),
    ):
        assert ServerFirstMessage.parse(text.encode()) == ServerFirstMessage(
            NONCE, b"some salt", 4096
        )


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (f"r={NONCE},s={SALT},i=0", "invalid iterations 0"),
        (f"r={NONCE},s={SALT},i=2147483648", "invalid iterations"),
        (f"r={NONCE},s==123,i=4096", f"r={NONCE},s==123,i=4096"),
        (f"r={NONCE},invalid,s={SALT},i=4096", f"r={NONCE},invalid,s={SALT},i=4096"),
        *((f"{reserved},r={NONCE},s={SALT},i=4096",) * 2 for reserved in INVALID_RESERVED),
        *((f"r={NONCE},s={SALT},i=4096,{extension}",) * 2 for extension in INVALID_EXTENSIONS),
    ],
)
def test_invalid_server_first_messages(text: str, error: str) -> None:
    with pytest.raises(ScramMessageError) as raised:
        ServerFirstMessage.parse(text.encode())
    assert str(raised.value) == f"Invalid SCRAM server first message format: {error}"


def test_valid_client_final_messages() -> None:
    message = ClientFinalMessage(b"n,,", NONCE, bytes(range(32)))
    assert message.to_bytes() == f"c=biws,r={NONCE},p={PROOF}".encode()
    assert ClientFinalMessage.parse(message.to_bytes()) == message
    for extension in VALID_EXTENSIONS:
        parsed = ClientFinalMessage.parse(f"c=biws,r={NONCE},{extension},p={PROOF}".encode())
        assert parsed == message
        assert parsed.without_proof == f"c=biws,r={NONCE}"  # Kafka leaves extensions out


@pytest.mark.parametrize(
    "text",
    [
        f"c=ab,r={NONCE},p={PROOF}",
        f"c=biws,r={NONCE},p=123",
        f"c=biws,r={NONCE}",
        *(f"c=biws,r={NONCE},{extension},p={PROOF}" for extension in INVALID_EXTENSIONS),
    ],
)
def test_invalid_client_final_messages(text: str) -> None:
    with pytest.raises(ScramMessageError) as error:
        ClientFinalMessage.parse(text.encode())
    assert str(error.value) == f"Invalid SCRAM client final message format: {text}"


def test_valid_server_final_messages() -> None:
    assert ServerFinalMessage.parse(b"e=other-error") == ServerFinalMessage(error="other-error")
    assert ServerFinalMessage(error="unknown-user").to_bytes() == b"e=unknown-user"
    signed = ServerFinalMessage(server_signature=bytes(range(32)))
    assert ServerFinalMessage.parse(signed.to_bytes()) == signed
    for extension in VALID_EXTENSIONS:
        assert ServerFinalMessage.parse(f"v={PROOF},{extension}".encode()) == signed


@pytest.mark.parametrize(
    "text",
    [
        "e=error1,error2",
        "v=1=23",
        *(f"v={PROOF},{extension}" for extension in INVALID_EXTENSIONS),
        *(f"e=unknown-user,{extension}" for extension in INVALID_EXTENSIONS),
    ],
)
def test_invalid_server_final_messages(text: str) -> None:
    with pytest.raises(ScramMessageError) as error:
        ServerFinalMessage.parse(text.encode())
    assert str(error.value) == f"Invalid SCRAM server final message format: {text}"


@pytest.mark.parametrize(
    "username",
    ["user1", "123", "1,2", "user=A", "user==B", "user,1", "user 1", ",", "=", ",=", "=="],
)
def test_sasl_names(username: str) -> None:
    """ScramFormatterTest.saslName."""
    name = sasl_name(username)
    assert "," not in name
    assert "=" not in name.replace("=2C", "").replace("=3D", "")
    assert username_from_sasl_name(name) == username


@pytest.mark.parametrize("name", ["a=b", "=2", "=2c", "==2C", "=3D2C="])
def test_invalid_sasl_names(name: str) -> None:
    with pytest.raises(ValueError, match=f"^Invalid username: {name}$"):
        username_from_sasl_name(name)


# --- the server (ScramSaslServerTest) ----------------------------------------------------


@pytest.mark.parametrize("authzid", ["", "a=userA"])
def test_server_first_message(authzid: str) -> None:
    server = server_for()
    server_first = ServerFirstMessage.parse(evaluate(server, f"n,{authzid},n=userA,r=abc".encode()))
    assert server_first.nonce.startswith("abc") and len(server_first.nonce) > 3
    assert server_first.iterations == 4096
    assert not server.is_complete


def test_authorization_id_other_than_username_is_told_to_the_client() -> None:
    server = server_for()
    with pytest.raises(SaslAuthenticationError) as error:
        evaluate(server, b"n,a=userB,n=userA,r=abc")
    assert str(error.value) == AUTHZID_MISMATCH
    assert error.value.__cause__ is None


def test_rfc7677_exchange(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scram, "secure_random_string", lambda: RFC_SERVER_NONCE)
    credential = SHA256.credential(RFC_PASSWORD, 4096, salt=RFC_SALT)
    server = ScramSaslServer(SHA256, lambda mechanism, user: credential)
    assert evaluate(server, RFC_C1) == RFC_S1
    assert evaluate(server, RFC_C2) == RFC_S2
    assert server.is_complete
    assert server.authorization_id == "user"
    assert server.credential_expiry_ms is None

    client = ScramSaslClient(SHA256, "user", RFC_PASSWORD, nonce=RFC_CLIENT_NONCE)
    assert client.initial_response() == RFC_C1
    assert client.evaluate(RFC_S1) == RFC_C2
    assert not client.is_complete
    assert client.evaluate(RFC_S2) == b""
    assert client.is_complete


def test_exchange_recorded_between_kafkas_client_and_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(scram, "secure_random_string", lambda: KAFKA_SERVER_NONCE)
    credential = SHA512.credential("pässwörd", 4096, salt=b"5r3v4w8q1yqg0lq9hprbfzbx4k")
    server = ScramSaslServer(SHA512, lambda mechanism, user: credential)
    assert evaluate(server, KAFKA_C1) == KAFKA_S1
    assert evaluate(server, KAFKA_C2) == KAFKA_S2
    assert server.authorization_id == "a,b=c"

    client = ScramSaslClient(SHA512, "a,b=c", "pässwörd", nonce=KAFKA_CLIENT_NONCE)
    assert client.initial_response() == KAFKA_C1
    assert client.evaluate(KAFKA_S1) == KAFKA_C2
    assert client.evaluate(KAFKA_S2) == b""


def test_the_lookup_gets_the_mechanism_and_the_unescaped_username() -> None:
    lookup = users(SHA512, **{"a,b=c": "pw"})
    server = ScramSaslServer(SHA512, lookup)
    run_exchange(ScramSaslClient(SHA512, "a,b=c", "pw"), server)
    assert lookup.asked == [("SCRAM-SHA-512", "a,b=c")]  # type: ignore[attr-defined]
    assert server.authorization_id == "a,b=c"


def hidden_failure(server: ScramSaslServer, *responses: bytes) -> str:
    """Kafka's reason for the failure; checks that the client is told only the fixed text."""
    *accepted, refused = responses
    for response in accepted:
        evaluate(server, response)
    with pytest.raises(SaslAuthenticationError) as error:
        evaluate(server, refused)
    assert str(error.value) == (
        f"Authentication failed during authentication due to invalid credentials with SASL "
        f"mechanism {server.mechanism}"
    )
    assert isinstance(error.value, InvalidCredentialsError)
    assert isinstance(error.value.__cause__, ScramFailure)
    assert not server.is_complete
    return str(error.value.__cause__)


def final_message(server_first: bytes, proof: bytes, nonce_prefix: str = "") -> bytes:
    nonce = ServerFirstMessage.parse(server_first).nonce
    return ClientFinalMessage(b"n,,", nonce_prefix + nonce, proof).to_bytes()


def test_unknown_user_fails_at_once() -> None:
    assert hidden_failure(server_for(), b"n,,n=nobody,r=abc") == (
        "Authentication failed: Invalid user credentials"
    )
    # even with an authorization id that differs: the user is looked up first
    assert hidden_failure(server_for(), b"n,a=x,n=nobody,r=abc") == (
        "Authentication failed: Invalid user credentials"
    )


def test_wrong_password() -> None:
    server = server_for()
    client = ScramSaslClient(SHA256, "userA", "passwordB")
    server_first = evaluate(server, client.initial_response())
    assert hidden_failure(server, client.evaluate(server_first)) == "Invalid client credentials"


@pytest.mark.parametrize("proof", [bytes(32), bytes(3), b""])
def test_bad_proofs(proof: bytes) -> None:
    server = server_for()
    server_first = evaluate(server, b"n,,n=userA,r=abc")
    assert hidden_failure(server, final_message(server_first, proof)) == (
        "Invalid client credentials"
    )


@pytest.mark.parametrize("prefix", ["x", "abc"])
def test_final_nonce_must_be_the_combined_nonce(prefix: str) -> None:
    """ScramSaslServerTest.validateFailedNonceExchange; Kafka 4.4 wants the nonce itself."""
    server = server_for()
    server_first = evaluate(server, b"n,,n=userA,r=abc")
    assert hidden_failure(server, final_message(server_first, bytes(32), prefix)) == (
        "Invalid client nonce in the final client message."
    )


@pytest.mark.parametrize(
    ("responses", "reason"),
    [
        ((b"y,,n=userA,r=abc",), "Invalid SCRAM client first message format: y,,n=userA,r=abc"),
        ((b"n,,n=us=er,r=abc",), "Invalid SCRAM client first message format: n,,n=us=er,r=abc"),
        (
            (b"n,,n=userA,r=abc,tokenauth=true",),
            "Token Authentication failed: Invalid tokenId : userA",
        ),
        (
            (b"n,,n=userA,r=abc,tokenauth=TRUE",),
            "Token Authentication failed: Invalid tokenId : userA",
        ),
        (
            (b"n,,n=userA,r=abc", b"c=biws,r=abc"),
            "Invalid SCRAM client final message format: c=biws,r=abc",
        ),
    ],
)
def test_hidden_failures(responses: tuple[bytes, ...], reason: str) -> None:
    assert hidden_failure(server_for(), *responses) == reason


def test_other_extensions_are_ignored() -> None:
    client = ScramSaslClient(
        SHA256, "userA", "passwordA", extensions={"tokenauth": "false", "x": "y"}
    )
    server = server_for()
    run_exchange(client, server)
    assert server.authorization_id == "userA"


def test_credential_with_too_few_iterations() -> None:
    credential = SHA256.credential("pw", 4095)
    server = ScramSaslServer(SHA256, lambda mechanism, user: credential)
    assert hidden_failure(server, b"n,,n=u,r=abc") == (
        "Iterations 4095 is less than the minimum 4096 for SCRAM_SHA_256"
    )


def test_a_failing_lookup() -> None:
    def lookup(mechanism: str, user: str) -> ScramCredential | None:
        raise OSError("metadata store unreachable")

    server = ScramSaslServer(SHA256, lookup)
    assert hidden_failure(server, b"n,,n=u,r=abc") == (
        "Authentication failed: Credentials could not be obtained"
    )


def test_a_finished_server_takes_no_more_messages() -> None:
    failed = server_for()
    hidden_failure(failed, b"n,,n=nobody,r=abc")
    with pytest.raises(RuntimeError, match="Unexpected challenge in Sasl server state FAILED"):
        evaluate(failed, b"n,,n=userA,r=abc")

    done = server_for()
    run_exchange(ScramSaslClient(SHA256, "userA", "passwordA"), done)
    with pytest.raises(RuntimeError, match="state COMPLETE"):
        evaluate(done, b"x")


def test_authorization_id_before_completion() -> None:
    server = server_for()
    evaluate(server, b"n,,n=userA,r=abc")
    with pytest.raises(RuntimeError, match="Authentication exchange has not completed"):
        _ = server.authorization_id


def test_reauthentication_wording() -> None:
    assert invalid_credentials_message("SCRAM-SHA-512", reauthentication=True) == (
        "Authentication failed during re-authentication due to invalid credentials with SASL "
        "mechanism SCRAM-SHA-512"
    )


# --- the client ---------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
@pytest.mark.parametrize("username", ["userA", "user,=B"])
def test_client_against_server(mechanism: ScramMechanism, username: str) -> None:
    server = ScramSaslServer(mechanism, users(mechanism, **{username: "pässwörd"}))
    client = ScramSaslClient(mechanism, username, "pässwörd")
    run_exchange(client, server)
    assert client.is_complete
    assert server.authorization_id == username


def client_failure(client: ScramSaslClient, challenge: bytes) -> str:
    with pytest.raises(SaslAuthenticationError) as error:
        client.evaluate(challenge)
    with pytest.raises(RuntimeError, match="Unexpected challenge in Sasl client state FAILED"):
        client.evaluate(challenge)
    return str(error.value)


@pytest.mark.parametrize(
    ("server_first", "error"),
    [
        (b"r=xyz,s=QUJD,i=4096", "Invalid server nonce: does not start with client nonce"),
        (
            b"r=abcxyz,s=QUJD,i=4095",
            "Requested iterations 4095 is less than the minimum 4096 for SCRAM_SHA_512",
        ),
        (b"r=abcxyz,s=QUJD", "Invalid SCRAM server first message format: r=abcxyz,s=QUJD"),
        (b"r=abcxyz,s=QUJD,i=0", "Invalid SCRAM server first message format: invalid iterations 0"),
    ],
)
def test_client_refuses_server_first(server_first: bytes, error: str) -> None:
    client = ScramSaslClient(SHA512, "u", "p", nonce="abc")
    client.initial_response()
    assert client_failure(client, server_first) == error


@pytest.mark.parametrize(
    ("server_final", "error"),
    [
        (
            b"e=unknown-user",
            "Sasl authentication using SCRAM_SHA_256 failed with error: unknown-user",
        ),
        (b"v=" + base64.b64encode(bytes(32)), "Invalid server signature in server final message"),
        (b"x", "Invalid SCRAM server final message format: x"),
    ],
)
def test_client_refuses_server_final(server_final: bytes, error: str) -> None:
    client = ScramSaslClient(SHA256, "userA", "passwordA")
    client.evaluate(evaluate(server_for(), client.initial_response()))
    assert client_failure(client, server_final) == error


def test_client_sends_its_first_message_once() -> None:
    client = ScramSaslClient(SHA256, "u", "p")
    client.initial_response()
    with pytest.raises(RuntimeError):
        client.initial_response()


# --- other clients ------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_kafka_python_client(mechanism: ScramMechanism) -> None:
    server = ScramSaslServer(mechanism, users(mechanism, alice="alice-secret"))
    client = ScramClient("alice", "alice-secret", mechanism.mechanism_name)
    client.process_server_first_message(evaluate(server, client.first_message()))
    client.process_server_final_message(evaluate(server, client.final_message()))
    assert server.authorization_id == "alice"


def test_kafka_python_client_with_a_wrong_password() -> None:
    server = ScramSaslServer(SHA256, users(SHA256, alice="alice-secret"))
    client = ScramClient("alice", "wrong", "SCRAM-SHA-256")
    client.process_server_first_message(evaluate(server, client.first_message()))
    assert hidden_failure(server, client.final_message()) == "Invalid client credentials"


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_aiokafka_client(mechanism: ScramMechanism) -> None:
    server = ScramSaslServer(mechanism, users(mechanism, **{"a,b=c": "pässwörd"}))

    async def exchange() -> None:
        authenticator = ScramAuthenticator(
            loop=asyncio.get_running_loop(),
            sasl_plain_username="a,b=c",
            sasl_plain_password="pässwörd",
            sasl_mechanism=mechanism.mechanism_name,
        )
        token, _ = await authenticator.step(None)
        token, _ = await authenticator.step(await server.evaluate(token))
        assert await authenticator.step(await server.evaluate(token)) is None

    asyncio.run(exchange())
    assert server.authorization_id == "a,b=c"
