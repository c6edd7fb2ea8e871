"""kcat against the broker under test, driven only through kcat's own command line.

Topics are created the way kcat users get them: by producing to a new name
(auto-creation, 3 partitions in this suite). The one look beneath kcat is
at the stored batches' compression attribute, because librdkafka before 2.11
silently sends uncompressed batches when it thinks the broker cannot take
compressed ones (librdkafka#4956): a round trip alone would not notice.

The broker is a secured one (``security`` fixture): the PLAINTEXT tests run
as User:ANONYMOUS, a super user; the SASL and SSL tests log in as ``alice``,
whose ACLs ``admin`` grants first (kcat has no admin commands, so that one
step goes through confluent-kafka).
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest

from compat.security import SecuredBroker
from compat.wire import fetch_batches
from tests.helpers.process import ToolResult, run_tool, wait_until
from tests.helpers.secure_clients import grant

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def kcat(*args: str, input: str | None = None, timeout: float = 60.0) -> ToolResult:
    return run_tool(["kcat", *args], input=input, timeout=timeout)


def produce(bootstrap: str, topic: str, lines: list[str], *args: str) -> None:
    """``kcat -P`` the lines (one message each); fails on any delivery error."""
    result = kcat("-b", bootstrap, "-P", "-t", topic, *args, input="".join(f"{x}\n" for x in lines))
    result.check()
    assert "ERROR" not in result.stderr, result.describe()


def consume(bootstrap: str, topic: str, partition: int, *args: str) -> list[dict[str, Any]]:
    """Every record of a partition from the beginning (or ``args``' -o), as -J objects."""
    result = kcat(
        "-b", bootstrap, "-C", "-t", topic, "-p", str(partition), "-o", "beginning", *args,
        "-e", "-J",
    ).check()  # fmt: skip
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def metadata(bootstrap: str, topic: str | None = None) -> dict[str, Any]:
    args = ["-t", topic] if topic else []
    return json.loads(kcat("-b", bootstrap, "-L", "-J", *args).check().stdout)


def test_metadata_lists_broker_and_auto_created_topic(bootstrap: str, topic_name: str) -> None:
    produce(bootstrap, topic_name, ["first"], "-p", "0")
    meta = metadata(bootstrap, topic_name)
    brokers = {b["id"]: b["name"] for b in meta["brokers"]}
    assert list(brokers.values()) == [bootstrap], meta
    assert meta["controllerid"] in brokers, meta
    [entry] = meta["topics"]
    assert entry["topic"] == topic_name and "error" not in entry, entry
    assert sorted(p["partition"] for p in entry["partitions"]) == [0, 1, 2], entry
    for part in entry["partitions"]:
        assert part["leader"] in brokers, part
        assert (
            [r["id"] for r in part["replicas"]]
            == [part["leader"]]
            == [r["id"] for r in part["isrs"]]
        ), part
    text = kcat("-b", bootstrap, "-L").check().stdout
    assert re.search(r"^ 1 brokers:", text, re.M), text
    assert f'topic "{topic_name}" with 3 partitions:' in text, text


@pytest.mark.parametrize("codec", list(CODECS))
def test_produce_with_codec_then_consume(bootstrap: str, topic_name: str, codec: str) -> None:
    """500 compressible lines with -z CODEC: stored with that codec, read back as sent."""
    lines = [f"{codec} line {i:05d} " + "abc" * (i % 40) for i in range(500)]
    # A lingering producer batches the lines: librdkafka sends a batch it cannot
    # shrink (one short line, sent before the others were read) uncompressed.
    produce(bootstrap, topic_name, lines, "-p", "1", "-z", codec, "-X", "linger.ms=200")
    got = consume(bootstrap, topic_name, 1)
    assert [r["payload"] for r in got] == lines
    assert [r["offset"] for r in got] == list(range(len(lines)))
    batches = fetch_batches(bootstrap, topic_name, 1)
    assert batches, "no batches stored"
    assert {b.compression for b in batches} == {CODECS[codec]}, [
        (b.base_offset, b.compression) for b in batches
    ]


def test_keys_headers_and_nulls(bootstrap: str, topic_name: str) -> None:
    lines = ["k1:v1", "k2:", ":no key", "k4:a:b:c", "k5:größe ✓", "k6:" + "x" * 10000]
    produce(bootstrap, topic_name, lines, "-p", "2", "-K", ":", "-Z", "-H", "h1=one", "-H", "h2=")
    got = consume(bootstrap, topic_name, 2)
    expected = [
        ("k1", "v1"), ("k2", None), (None, "no key"), ("k4", "a:b:c"),
        ("k5", "größe ✓"), ("k6", "x" * 10000),
    ]  # fmt: skip
    assert [(r["key"], r["payload"]) for r in got] == expected
    assert all(r["headers"] == ["h1", "one", "h2", ""] for r in got), got
    formatted = kcat(
        "-b", bootstrap, "-C", "-t", topic_name, "-p", "2", "-o", "2", "-c", "2", "-e", "-Z",
        "-f", "%k|%S|%o|%p\n",
    ).check()  # fmt: skip
    assert formatted.stdout.splitlines() == ["NULL|6|2|2", "k4|5|3|2"]
    # The other partitions stayed empty.
    assert consume(bootstrap, topic_name, 0) == []


def query(bootstrap: str, topic: str, partition: int, timestamp: int) -> int:
    """``kcat -Q``: the offset for a timestamp (-1 end, -2 beginning)."""
    result = kcat("-b", bootstrap, "-Q", "-t", f"{topic}:{partition}:{timestamp}").check()
    match = re.search(rf"^{re.escape(topic)} \[{partition}\] offset (-?\d+)", result.stdout, re.M)
    assert match, result.describe()
    return int(match.group(1))


def test_offsets_by_time(bootstrap: str, topic_name: str) -> None:
    """-Q and -o s@TS find the first record at or after a time; e@TS stops before one."""
    produce(bootstrap, topic_name, [f"early-{i}" for i in range(5)], "-p", "0")
    time.sleep(0.05)
    boundary = int(time.time() * 1000)
    time.sleep(0.05)
    produce(bootstrap, topic_name, [f"late-{i}" for i in range(7)], "-p", "0")

    stamps = [r["ts"] for r in consume(bootstrap, topic_name, 0)]
    assert len(stamps) == 12 and max(stamps[:5]) < boundary <= min(stamps[5:]), stamps
    assert query(bootstrap, topic_name, 0, boundary) == 5
    assert query(bootstrap, topic_name, 0, stamps[0]) == 0
    assert query(bootstrap, topic_name, 0, stamps[-1]) == stamps.index(stamps[-1])
    assert query(bootstrap, topic_name, 0, stamps[-1] + 60_000) == -1
    assert query(bootstrap, topic_name, 0, -1) == 12
    assert query(bootstrap, topic_name, 0, -2) == 0

    late = consume(bootstrap, topic_name, 0, "-o", f"s@{boundary}")
    assert [r["payload"] for r in late] == [f"late-{i}" for i in range(7)]
    early = kcat(
        "-b", bootstrap, "-C", "-t", topic_name, "-p", "0", "-o", "beginning",
        "-o", f"e@{boundary}", "-f", "%s\n",
    ).check()  # fmt: skip
    assert early.stdout.split() == [f"early-{i}" for i in range(5)], early.describe()


def group_consume(bootstrap: str, group: str, topic: str, *args: str) -> list[str]:
    """``kcat -G`` until the end of every assigned partition; returns the values.

    A new group starts at the beginning through auto.offset.reset: kcat's
    ``-o`` would override the committed offsets on every assignment.
    """
    result = kcat(
        "-b", bootstrap, "-G", group, "-e", "-f", "%s\n", "-X", "auto.offset.reset=earliest",
        "-X", "session.timeout.ms=6000", *args, topic, timeout=90,
    ).check()  # fmt: skip
    return result.stdout.split()


def test_balanced_group_consumes_once_and_resumes(bootstrap: str, topic_name: str) -> None:
    """-G reads every partition once, commits, and a second run picks up only new records."""
    first = [f"first-{i}" for i in range(30)]
    for partition in range(3):
        produce(bootstrap, topic_name, first[partition::3], "-p", str(partition))
    group = f"{topic_name}-group"
    assert sorted(group_consume(bootstrap, group, topic_name)) == sorted(first)

    later = [f"later-{i}" for i in range(6)]
    for partition in range(3):
        produce(bootstrap, topic_name, later[partition::3], "-p", str(partition))
    wait_until(lambda: query(bootstrap, topic_name, 2, -1) == 12, 10, message="all appended")
    assert sorted(group_consume(bootstrap, group, topic_name)) == sorted(later)


# -- over SASL and TLS ---------------------------------------------------------------------


def sasl(security: SecuredBroker, listener: str, mechanism: str, user: str = "alice") -> list[str]:
    """kcat's settings to log in as ``user`` on a SASL listener (with the CA file for TLS)."""
    settings = {
        "security.protocol": listener,
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": security.users[user],
    }
    if listener == "SASL_SSL":
        settings["ssl.ca.location"] = security.ca_pem
    return [arg for key, value in settings.items() for arg in ("-X", f"{key}={value}")]


def client_certificate(security: SecuredBroker, user: str | None = "alice") -> list[str]:
    """kcat's settings for the SSL listener: the CA file, and ``user``'s certificate if any."""
    settings = {"security.protocol": "SSL", "ssl.ca.location": security.ca_pem}
    if user is not None:
        files = security.clients[user]
        settings |= {"ssl.certificate.location": files.chain_pem, "ssl.key.location": files.key_pem}
    return [arg for key, value in settings.items() for arg in ("-X", f"{key}={value}")]


def test_sasl_plaintext_plain_produce_and_group_consume(
    security: SecuredBroker, topic_name: str
) -> None:
    """alice, with CREATE, WRITE and READ on a topic and READ on a group, creates it by
    producing, then reads it back as a balanced group member."""
    group = f"{topic_name}-group"
    grant(security, "alice", topic_name, "CREATE", "WRITE", "READ", group=group)
    address = security.bootstrap_for("SASL_PLAINTEXT")
    login = sasl(security, "SASL_PLAINTEXT", "PLAIN")
    lines = [f"plain-{i}" for i in range(30)]
    produce(address, topic_name, lines, *login)
    assert sorted(group_consume(address, group, topic_name, *login)) == sorted(lines)


def test_sasl_ssl_plain_with_the_ca_file(security: SecuredBroker, topic_name: str) -> None:
    """SASL PLAIN over TLS, the broker checked against the CA: a compressed produce, read back
    from a partition."""
    grant(security, "alice", topic_name, "CREATE", "WRITE", "READ")
    address = security.bootstrap_for("SASL_SSL")
    login = sasl(security, "SASL_SSL", "PLAIN")
    lines = [f"tls line {i:04d} " + "xyz" * (i % 30) for i in range(200)]
    produce(address, topic_name, lines, "-p", "1", "-z", "lz4", *login)
    got = consume(address, topic_name, 1, *login)
    assert [r["payload"] for r in got] == lines
    assert [r["offset"] for r in got] == list(range(len(lines)))


def test_scram_from_librdkafka_before_2_6_1_is_refused_as_by_kafka_4(
    security: SecuredBroker,
) -> None:
    """librdkafka before 2.6.1 appends its nonce twice in the SCRAM client-final message
    (librdkafka#4895); Kafka 4 compares the nonce strictly (RFC 5802) and refuses the login
    with its invalid-credentials message, whichever SCRAM mechanism. So must the broker:
    kcat 1.7.1 on librdkafka 2.0.2 cannot log in with SCRAM."""
    address = security.bootstrap_for("SASL_PLAINTEXT")
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        result = kcat("-b", address, "-L", "-m", "5", *sasl(security, "SASL_PLAINTEXT", mechanism))
        assert result.returncode != 0, result.describe()
        expected = (
            "SASL authentication error: Authentication failed during authentication due to "
            f"invalid credentials with SASL mechanism {mechanism}"
        )
        assert expected in result.stderr, result.describe()


def test_ssl_metadata_with_a_client_certificate(
    security: SecuredBroker, bootstrap: str, topic_name: str
) -> None:
    """-L over SSL as CN=alice: the broker lists itself at the SSL listener's address, hides
    the topic until alice may DESCRIBE it (so the certificate mapped to User:alice), then
    lists its partitions."""
    produce(bootstrap, topic_name, ["first"], "-p", "0")
    address = security.bootstrap_for("SSL")
    login = client_certificate(security)

    def describe() -> dict[str, Any]:
        return json.loads(kcat("-b", address, "-L", "-J", "-t", topic_name, *login).check().stdout)

    hidden = describe()
    assert [b["name"] for b in hidden["brokers"]] == [address], hidden
    assert hidden["topics"] == [
        {"topic": topic_name, "error": "Broker: Topic authorization failed", "partitions": []}
    ], hidden
    grant(security, "alice", topic_name, "DESCRIBE")
    [entry] = describe()["topics"]
    assert "error" not in entry, entry
    assert sorted(p["partition"] for p in entry["partitions"]) == [0, 1, 2], entry


def test_ssl_without_a_client_certificate_is_refused_with_a_tls_alert(
    security: SecuredBroker,
) -> None:
    """The SSL listener requires a client certificate: a client without one is told so by a
    TLS alert (Kafka's: bad_certificate), not by a connection that just ends."""
    result = kcat(
        "-b", security.bootstrap_for("SSL"), "-L", "-m", "5", *client_certificate(security, None)
    )
    assert result.returncode != 0, result.describe()
    assert "SSL alert number" in result.stderr, result.describe()
