"""Tests of ``kpybroker.metadata.znodes``: each znode's payload, as Kafka's ZkData writes it."""

from __future__ import annotations

import json
import uuid

from kpybroker.metadata.model import Endpoint, PartitionState, uuid_to_str
from kpybroker.metadata.store import NodeStat
from kpybroker.metadata.znodes import (
    decode_broker,
    decode_cluster_id,
    decode_config,
    decode_controller,
    decode_controller_epoch,
    decode_state_entry,
    decode_topic,
    encode_broker,
    encode_cluster_id,
    encode_config,
    encode_controller,
    encode_controller_epoch,
    encode_state,
    encode_topic,
    partition_state_path,
    topic_path,
)

STAT = NodeStat(
    czxid=7,
    mzxid=8,
    ctime=0,
    mtime=0,
    version=3,
    cversion=0,
    ephemeral_owner=0,
    data_length=0,
    num_children=0,
)


def test_paths() -> None:
    assert topic_path("t") == "/brokers/topics/t"
    assert partition_state_path("t", 2) == "/brokers/topics/t/partitions/2/state"


def test_small_nodes_round_trip() -> None:
    assert encode_cluster_id("abc") == b'{"version":"1","id":"abc"}'
    assert decode_cluster_id(encode_cluster_id("abc")) == "abc"
    controller = json.loads(encode_controller(4))
    assert controller["version"] == 2 and controller["kraftControllerEpoch"] == -1
    assert isinstance(controller["timestamp"], str)
    assert decode_controller(encode_controller(4)) == 4
    assert encode_controller_epoch(0) == b"0"
    assert decode_controller_epoch(encode_controller_epoch(12)) == 12
    assert encode_config({"a": "1"}) == b'{"version":1,"config":{"a":"1"}}'
    assert decode_config("t", encode_config({"a": "1"}), STAT) == {"a": "1"}


def test_broker_round_trip() -> None:
    endpoints = (Endpoint("PLAINTEXT", "::1", 9092), Endpoint("SSL", "h", 9093, "SSL"))
    data = encode_broker(endpoints, "r1")
    info = json.loads(data)
    assert info["endpoints"] == ["PLAINTEXT://[::1]:9092", "SSL://h:9093"]
    assert (info["host"], info["port"], info["version"]) == ("::1", 9092, 5)
    registration = decode_broker("5", data, STAT)
    assert registration.broker_id == 5 and registration.rack == "r1"
    assert registration.endpoints == endpoints and registration.epoch == STAT.czxid
    assert "rack" not in json.loads(encode_broker(endpoints, None))


def test_topic_and_state_round_trip() -> None:
    topic_id = uuid.UUID(int=5)
    data = encode_topic(topic_id, {1: [1, 2], 0: [0]}, adding={1: [2]}, removing={0: []})
    assert json.loads(data) == {
        "version": 3,
        "topic_id": uuid_to_str(topic_id),
        "partitions": {"0": [0], "1": [1, 2]},
        "adding_replicas": {"1": [2]},
        "removing_replicas": {},
    }
    node = decode_topic("t", data, STAT)
    assert node.topic_id == topic_id and node.version == STAT.version
    assert node.replicas == {0: (0,), 1: (1, 2)} and node.adding == {1: (2,)}
    state = PartitionState(leader=1, leader_epoch=2, isr=(1, 2), controller_epoch=3)
    assert "leader_recovery_state" not in json.loads(encode_state(state))
    assert decode_state_entry(encode_state(state), STAT) == (state, STAT.version)
    recovering = PartitionState(1, 2, (1,), 3, leader_recovery_state=1)
    assert decode_state_entry(encode_state(recovering), STAT)[0] == recovering
