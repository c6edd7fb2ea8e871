"""The ACL znodes: Kafka 3.9's ZooKeeper paths and payloads, byte for byte where Kafka's were fixed.

The expected bytes were produced with Jackson's ObjectMapper from Kafka's own
lib directory, given the maps Kafka 3.9's ``AclEntry.toJsonCompatibleMap``
builds (hash maps, hence the key order) and the fields of its
``ExtendedAclChangeEvent``.
"""

from __future__ import annotations

import pytest

from kpybroker.metadata.acl_znodes import (
    AclEntryNode,
    AclNode,
    acl_changes_path,
    acl_store_path,
    decode_acls,
    decode_extended_change,
    decode_literal_change,
    encode_acls,
    encode_extended_change,
    encode_literal_change,
    is_storable_name,
    resource_path,
    resource_type_path,
)
from kpybroker.metadata.store import NodeStat
from kpybroker.metadata.znodes import DECODE_ERRORS


def stat(version: int = 0) -> NodeStat:
    return NodeStat(1, 1, 0, 0, version, 0, 0, 0, 0)


ALICE_READS = AclEntryNode("User:alice", "Allow", "Read", "*")


def test_paths() -> None:
    assert acl_store_path("LITERAL") == "/kafka-acl"
    assert acl_store_path("PREFIXED") == "/kafka-acl-extended/prefixed"
    assert resource_type_path("LITERAL", "Topic") == "/kafka-acl/Topic"
    assert (
        resource_path("LITERAL", "Cluster", "kafka-cluster") == "/kafka-acl/Cluster/kafka-cluster"
    )
    assert (
        resource_path("PREFIXED", "TransactionalId", "tx-")
        == "/kafka-acl-extended/prefixed/TransactionalId/tx-"
    )
    assert acl_changes_path("LITERAL") == "/kafka-acl-changes"
    assert acl_changes_path("PREFIXED") == "/kafka-acl-extended-changes"


def test_acls_json_is_kafkas() -> None:
    assert encode_acls([ALICE_READS]) == (
        b'{"acls":[{"principal":"User:alice","permissionType":"Allow","host":"*",'
        b'"operation":"Read"}],"version":1}'
    )


def test_text_beyond_ascii_is_written_as_jackson_writes_it() -> None:
    entry = AclEntryNode('User:CN=Zoë "x"\t\x01/\u2028', "Deny", "DescribeConfigs", "10.0.0.1")
    assert encode_acls([entry]) == (
        b'{"acls":[{"principal":"User:CN=Zo\xc3\xab \\"x\\"\\t\\u0001/\xe2\x80\xa8",'
        b'"permissionType":"Deny","host":"10.0.0.1","operation":"DescribeConfigs"}],"version":1}'
    )


def test_acls_round_trip_in_a_stable_order() -> None:
    entries = {
        ALICE_READS,
        AclEntryNode("User:*", "Deny", "All", "10.0.0.1"),
        AclEntryNode("User:bob", "Allow", "Write", "*"),
    }
    data = encode_acls(entries)
    assert data == encode_acls(reversed(sorted(entries)))
    assert decode_acls("t", data, stat(7)) == AclNode(frozenset(entries), 7)


def test_acls_as_kafka_documents_them_decode() -> None:
    """Whitespace and key order are Jackson's business; the example of ZkData's docs."""
    data = (
        b'{"version": 1, "acls": [ { "host":"host1", "permissionType": "Allow",'
        b'"operation": "Read","principal": "User:alice"}]}'
    )
    assert decode_acls("t", data, stat()).entries == {
        AclEntryNode("User:alice", "Allow", "Read", "host1")
    }


def test_an_empty_znode_holds_no_acls() -> None:
    assert decode_acls("t", b"", stat(3)) == AclNode(frozenset(), 3)


@pytest.mark.parametrize(
    "data",
    [
        b"not json",
        b'{"version":2,"acls":[]}',
        b'{"acls":[]}',
        b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Allow","host":"*"}]}',
        b'{"version":1,"acls":[{"principal":7,"permissionType":"Allow","operation":"Read",'
        b'"host":"*"}]}',
    ],
)
def test_malformed_acls_raise_a_decode_error(data: bytes) -> None:
    with pytest.raises(DECODE_ERRORS):
        decode_acls("t", data, stat())


def test_literal_change_notification() -> None:
    assert encode_literal_change("TOPIC", "a:b") == b"TOPIC:a:b"
    assert decode_literal_change(b"TRANSACTIONAL_ID:a:b") == ("TRANSACTIONAL_ID", "a:b")
    with pytest.raises(ValueError, match="ResourceType:ResourceName"):
        decode_literal_change(b"TOPIC")


def test_extended_change_notification() -> None:
    data = encode_extended_change("TOPIC", "foo", "PREFIXED")
    assert data == b'{"version":1,"resourceType":"TOPIC","name":"foo","patternType":"PREFIXED"}'
    assert decode_extended_change(data) == ("TOPIC", "foo", "PREFIXED")
    with pytest.raises(ValueError, match="unsupported"):
        decode_extended_change(
            b'{"version":2,"resourceType":"TOPIC","name":"foo","patternType":"PREFIXED"}'
        )


@pytest.mark.parametrize(
    ("name", "storable"),
    [
        ("orders", True),
        ("*", True),
        ("a.b:c-d_é€", True),
        ("", False),
        (".", False),
        ("..", False),
        ("a/b", False),
        ("nul\x00", False),
        ("del\x7f", False),
        ("\x9f", False),
        ("private\ue000", False),
        ("\ufff0", False),
        ("emoji\U0001f600", False),
    ],
)
def test_storable_names_are_zookeepers(name: str, storable: bool) -> None:
    assert is_storable_name(name) is storable
