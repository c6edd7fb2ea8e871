"""Byte-exact cross-checks of the generated codecs against kafka-python's.

kafka-python 3.x builds its messages from Apache Kafka's own JSON schemas, so it
is an independent encoder and decoder for every API and version. For each API,
each version both sides support, requests and responses alike, and three value
sets (every field set to a non-default value including tagged fields; every
nullable field null; every field left at its default), this test

1. builds the message with kafka-python and encodes it;
2. builds the same message with our generated classes and encodes it: the bytes
   must be identical;
3. decodes kafka-python's bytes with our decoder: every field must hold the value
   that was set, the whole buffer must be consumed, and re-encoding must give the
   same bytes again;
4. decodes our bytes with kafka-python: every field must hold the value set.
"""

from __future__ import annotations

import importlib
import uuid

import pytest

pytest.importorskip("kafka.protocol")

from kafka.protocol import admin, consumer, metadata, producer, sasl
from kafka.protocol.api_data import ApiData
from kafka.protocol.api_message import ApiMessage

# (our module, API name); the kafka-python classes are <Name>Request/<Name>Response.
APIS = [
    ("api_versions", "ApiVersions"),
    ("metadata", "Metadata"),
    ("produce", "Produce"),
    ("fetch", "Fetch"),
    ("list_offsets", "ListOffsets"),
    ("create_topics", "CreateTopics"),
    ("delete_topics", "DeleteTopics"),
    ("init_producer_id", "InitProducerId"),
    ("offset_for_leader_epoch", "OffsetForLeaderEpoch"),
    ("find_coordinator", "FindCoordinator"),
    ("join_group", "JoinGroup"),
    ("sync_group", "SyncGroup"),
    ("heartbeat", "Heartbeat"),
    ("leave_group", "LeaveGroup"),
    ("offset_commit", "OffsetCommit"),
    ("offset_fetch", "OffsetFetch"),
    ("describe_groups", "DescribeGroups"),
    ("list_groups", "ListGroups"),
    ("delete_groups", "DeleteGroups"),
    ("offset_delete", "OffsetDelete"),
    ("describe_configs", "DescribeConfigs"),
    ("alter_configs", "AlterConfigs"),
    ("incremental_alter_configs", "IncrementalAlterConfigs"),
    ("create_partitions", "CreatePartitions"),
    ("describe_cluster", "DescribeCluster"),
    ("describe_log_dirs", "DescribeLogDirs"),
    ("describe_topic_partitions", "DescribeTopicPartitions"),
    ("elect_leaders", "ElectLeaders"),
    ("describe_producers", "DescribeProducers"),
    ("delete_records", "DeleteRecords"),
    ("create_acls", "CreateAcls"),
    ("describe_acls", "DescribeAcls"),
    ("delete_acls", "DeleteAcls"),
    ("list_config_resources", "ListConfigResources"),
    ("alter_partition_reassignments", "AlterPartitionReassignments"),
    ("list_partition_reassignments", "ListPartitionReassignments"),
    ("sasl_handshake", "SaslHandshake"),
    ("sasl_authenticate", "SaslAuthenticate"),
]
# Standalone messages: (our module, class name in both libraries).
MESSAGES = [
    ("consumer_protocol_subscription", "ConsumerProtocolSubscription"),
    ("consumer_protocol_assignment", "ConsumerProtocolAssignment"),
]
KP_MODULES = (metadata, producer, consumer, admin, sasl)
VARIANTS = ("full", "nulls", "defaults")

# kafka-python renames a few fields (json_patch) to share a bitfield helper:
# (kafka-python class or struct name, its field name) -> our field name.
RENAMED = {
    ("MetadataResponse", "authorized_operations"): "cluster_authorized_operations",
    ("MetadataResponseTopic", "authorized_operations"): "topic_authorized_operations",
    ("DescribeClusterResponse", "authorized_operations"): "cluster_authorized_operations",
}


def kp_class(name):
    for module in KP_MODULES:
        if hasattr(module, name):
            return getattr(module, name)
    raise LookupError(name)


def cases():
    pairs = [(m, api + kind) for m, api in APIS for kind in ("Request", "Response")] + MESSAGES
    for module, name in pairs:
        kp_cls = kp_class(name)
        ours_module = importlib.import_module(f"kpybroker.protocol.messages.{module}")
        low, high = getattr(ours_module, name).VERSIONS
        # kafka-python's JSON (Kafka 4.x) drops old versions from validVersions but keeps
        # their fields, and its classes encode from v0 on: every version is comparable.
        for version in range(kp_cls.min_version, kp_cls.max_version + 1):
            if low <= version <= high:
                for variant in VARIANTS:
                    yield pytest.param(
                        kp_cls, ours_module, version, variant, id=f"{name}-v{version}-{variant}"
                    )


def kp_encode(obj, version):
    if isinstance(obj, ApiData):
        return bytes(obj.encode(version=version, header=False))
    return bytes(obj.encode(version=version))


def kp_decode(cls, data, version):
    if issubclass(cls, ApiData):
        return cls.decode(data, version=version, header=False)
    # ApiVersionsResponse.decode would switch to v0 on an error code: use the plain decoder.
    return ApiMessage.decode.__func__(cls, data, version=version)


# -- building one message with kafka-python --------------------------------


class Builder:
    """Fills a kafka-python struct with distinct, non-default values."""

    def __init__(self, version, variant):
        self.version = version
        self.variant = variant
        self.n = 0

    def next(self):
        self.n += 1
        return self.n

    def fields(self, struct):
        values = {}
        if self.variant == "defaults":
            return values
        for f in struct._fields:
            if not f.for_version_q(self.version):
                continue
            if self.variant == "nulls" and f.tagged_field_q(self.version):
                continue  # tagged fields stay at their default, hence off the wire
            values[f.name] = self.value(f)
        return values

    def value(self, f):
        if self.variant == "nulls" and f.nullable_for_version_q(self.version):
            return None
        count = 2 if self.variant == "full" else 1
        if f.is_struct_array():
            return [f.data_class(**self.fields(f.array_of)) for _ in range(count)]
        if f.is_struct():
            return f.data_class(**self.fields(f))
        if f.is_array():
            return [self.scalar(f.array_of) for _ in range(count + 1)]
        return self.scalar(f)

    def scalar(self, f):
        n = self.next()
        kind = f.type_str
        if kind == "bool":
            return not f.default
        if kind == "int8":
            return n % 100 + 1
        if kind == "int16":
            return -(n * 7) if n % 2 else n * 7
        if kind == "uint16":
            return 40000 + n
        if kind == "int32":
            return n * 100_003
        if kind == "int64":
            return n * 1_000_000_000_007 * (-1 if n % 3 == 0 else 1)
        if kind == "float64":
            return n + 0.25
        if kind == "string":
            return f"s{n}-\u00e9"  # non-ASCII: lengths are in UTF-8 bytes
        if kind in ("bytes", "records"):
            return bytes(range(n % 7 + 1)) * 3
        if kind == "uuid":
            return uuid.UUID(int=n * 0x0102030405060708090A0B0C0D0E0F11)
        if kind == "bitfield":
            return {n % 8, 9}
        raise AssertionError(f"no sample value for {kind}")


# -- converting between the two object models ------------------------------


def our_name(owner, name):
    return RENAMED.get((owner, name), name)


def to_ours(kp_obj, struct, owner, ours_module, ours_cls, version):
    """Our object holding the same values as a kafka-python object."""
    kwargs = {}
    for f in struct._fields:
        if not f.for_version_q(version):
            continue
        value = getattr(kp_obj, f.name)
        if not (f.is_struct() or f.is_struct_array()):
            value = plain(f, value)
        elif value is None and f.is_struct() and not f.nullable_for_version_q(version):
            continue  # kafka-python's default for a tagged struct; ours is the all-default struct
        elif value is not None:
            inner_cls = getattr(ours_module, f.type_str)
            inner = f.array_of if f.is_struct_array() else f
            items = value if f.is_struct_array() else [value]
            items = [to_ours(x, inner, f.type_str, ours_module, inner_cls, version) for x in items]
            value = items if f.is_struct_array() else items[0]
        kwargs[our_name(owner, f.name)] = value
    return ours_cls(**kwargs)


def plain(f, value):
    """A kafka-python value as our codecs hold it (uuid -> 16 bytes, bitfield -> int32)."""
    if f.is_array():
        return None if value is None else [plain(f.array_of, x) for x in value]
    if f.type_str == "uuid":
        return bytes(16) if value is None else value.bytes
    if f.type_str == "bitfield":
        bits = sum(1 << b for b in ({31} if value is None else value))
        return bits - (1 << 32) if bits >= 1 << 31 else bits
    if isinstance(value, memoryview | bytearray):
        return bytes(value)
    return value


def snapshot(obj, struct, owner, version, ours):
    """Every field present in ``version``, by kafka-python's field list, as plain values."""
    out = {}
    for f in struct._fields:
        if not f.for_version_q(version):
            continue
        value = getattr(obj, our_name(owner, f.name) if ours else f.name)
        if value is None and f.is_struct() and not f.nullable_for_version_q(version):
            value = f.data_class()  # kafka-python's default for a tagged struct
        if value is None and (ours or f.is_struct() or f.is_struct_array()):
            pass
        elif f.is_struct_array():
            value = [snapshot(x, f.array_of, f.type_str, version, ours) for x in value]
        elif f.is_struct():
            value = snapshot(value, f, f.type_str, version, ours)
        elif ours:
            value = bytes(value) if isinstance(value, memoryview) else value
        else:
            value = plain(f, value)
        out[f.name] = value
    return out


@pytest.mark.parametrize(("kp_cls", "ours_module", "version", "variant"), list(cases()))
def test_matches_kafka_python(kp_cls, ours_module, version, variant):
    name = kp_cls.__name__
    ours_cls = getattr(ours_module, name)
    kp_obj = kp_cls(version=version, **Builder(version, variant).fields(kp_cls._struct))
    expected = snapshot(kp_obj, kp_cls._struct, name, version, ours=False)
    kp_bytes = kp_encode(kp_obj, version)

    ours_built = to_ours(kp_obj, kp_cls._struct, name, ours_module, ours_cls, version)
    our_bytes = ours_built.encode_bytes(version)
    assert our_bytes.hex() == kp_bytes.hex()

    decoded, end = ours_cls.decode(kp_bytes, 0, version)
    assert end == len(kp_bytes)
    assert snapshot(decoded, kp_cls._struct, name, version, ours=True) == expected
    assert decoded.encode_bytes(version) == kp_bytes

    kp_decoded = kp_decode(kp_cls, our_bytes, version)
    assert snapshot(kp_decoded, kp_cls._struct, name, version, ours=False) == expected
