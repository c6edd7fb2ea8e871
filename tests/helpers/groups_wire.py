"""Helpers shared by the consumer-group tests (no tests here).

``Wire`` speaks the Kafka protocol over a plain socket with kpybroker's
generated codecs, for raw and out-of-order group requests and for reading
the coordinator's view of a group (DescribeGroups, with the members'
assignments decoded).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import Producer

from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.framing import decode_response, encode_request
from kpybroker.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from kpybroker.protocol.messages.consumer_protocol_assignment import ConsumerProtocolAssignment
from kpybroker.protocol.messages.describe_groups import DescribeGroupsRequest
from kpybroker.protocol.messages.find_coordinator import FindCoordinatorRequest
from kpybroker.protocol.messages.heartbeat import HeartbeatRequest
from tests.helpers.process import wait_until
from tests.helpers.wire import RawConnection

BROKER_OVERRIDES = {
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 1000,
}


class Wire(RawConnection):
    """A raw connection speaking kpybroker's generated codecs: ``call(request, version)``."""

    def __init__(self, bootstrap: str, client_id: str = "group-tests") -> None:
        super().__init__(bootstrap, timeout=30.0)
        self.client_id = client_id
        self.last_id = 0

    def send_request(self, request: Any, version: int) -> None:
        self.last_id = self.next_correlation_id()
        self.send(encode_request(request, version, self.last_id, self.client_id))

    def receive(self, request: Any, version: int) -> Any:
        """The response to the last request sent (``request`` names the API)."""
        correlation_id, response = decode_response(self.recv_frame(), request, version)
        assert correlation_id == self.last_id, (correlation_id, self.last_id)
        return response

    def call(self, request: Any, version: int) -> Any:
        self.send_request(request, version)
        return self.receive(request, version)


def find_coordinator(bootstrap: str, group: str) -> None:
    """Wait until this broker coordinates ``group``, as a client would retry.

    The first lookup creates __consumer_offsets: Kafka answers it
    COORDINATOR_NOT_AVAILABLE, then NOT_COORDINATOR or LOAD_IN_PROGRESS to
    group requests while the partition loads; kpybroker is ready at once.
    A heartbeat from a member that does not exist tells when it is.
    """
    with Wire(bootstrap) as wire:

        def ready() -> bool:
            found = wire.call(FindCoordinatorRequest(key=group, key_type=0), 3)
            if found.error_code:
                return False
            assert f"{found.host}:{found.port}" == bootstrap, found
            probe = wire.call(HeartbeatRequest(group, 0, "probe"), 3)
            return probe.error_code == ErrorCode.UNKNOWN_MEMBER_ID

        wait_until(ready, 60, message=f"this broker ready to coordinate {group}")


def decode_assignment(data: bytes) -> dict[str, list[int]]:
    """A consumer-protocol assignment's partitions by topic."""
    (version,) = struct.unpack_from(">h", data)
    assignment, _ = ConsumerProtocolAssignment.decode(data, 2, min(version, 3))
    return {tp.topic: sorted(tp.partitions) for tp in assignment.assigned_partitions}


def describe(bootstrap: str, group: str) -> Any:
    """The coordinator's DescribeGroups answer (v5) for one group."""
    with Wire(bootstrap) as wire:
        [described] = wire.call(DescribeGroupsRequest(groups=[group]), 5).groups
    return described


def owners(bootstrap: str, group: str, topic: str) -> tuple[str, dict[int, list[str]]]:
    """(state, partition -> member IDs owning it) from the assignments the coordinator holds."""
    described = describe(bootstrap, group)
    owned: dict[int, list[str]] = {}
    for member in described.members:
        if member.member_assignment:
            for p in decode_assignment(member.member_assignment).get(topic, []):
                owned.setdefault(p, []).append(member.member_id)
    return described.group_state, owned


def consumer_group_owners(
    bootstrap: str, group: str, topic: str
) -> tuple[str, dict[int, list[str]]]:
    """``owners`` for a consumer-protocol group: from ConsumerGroupDescribe (v1), each
    member's current assignment."""
    with Wire(bootstrap) as wire:
        [described] = wire.call(ConsumerGroupDescribeRequest(group_ids=[group]), 1).groups
    owned: dict[int, list[str]] = {}
    for member in described.members:
        for assigned in member.assignment.topic_partitions:
            if assigned.topic_name == topic:
                for p in assigned.partitions:
                    owned.setdefault(p, []).append(member.member_id)
    return described.group_state, owned


def produce(bootstrap: str, topic: str, values: Mapping[int, Iterable[str]]) -> int:
    """Produce each partition's values (acks=all); returns how many were acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
    acked: list[Any] = []
    for partition, items in values.items():
        for value in items:
            producer.produce(
                topic,
                value=value.encode(),
                partition=partition,
                on_delivery=lambda err, _msg: acked.append(err),
            )
    assert producer.flush(60) == 0, "records still unacknowledged after 60 s"
    assert all(err is None for err in acked), [e for e in acked if e is not None]
    return len(acked)
