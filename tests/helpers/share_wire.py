"""KIP-932 share-group requests over a plain socket, with Kafka's own message schemas.

kafka-python 3.0 builds its protocol classes from Kafka's JSON message schemas but ships
none of the share-group ones (nor ConsumerGroupHeartbeat/Describe). This module takes them
from the kafka-clients jar that the tests already run (``fetch_kafka_lib``): the schemas
are extracted into a throwaway package and turned into kafka-python ``ApiMessage``
classes, so requests and responses are encoded exactly as Kafka 4.4 defines them, null
strings and all. Nothing here depends on kpybroker's own codecs, so the same code checks
Apache Kafka and kpybroker.

    with ShareWire(bootstrap) as wire:
        answer = wire.call(msg.ShareGroupHeartbeatRequest(group_id="g", ...), 1)

Field names are kafka-python's snake_case of the schema's names (``member_epoch``);
nested structs are attributes of their class (``msg.ShareFetchRequest.FetchTopic``).
"""

from __future__ import annotations

import base64
import functools
import importlib
import sys
import tempfile
import time
import uuid
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kafka.protocol.admin import DescribeConfigsRequest, IncrementalAlterConfigsRequest
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.metadata import MetadataRequest

from tests.helpers.wire import RawConnection

#: The APIs kafka-python lacks, loaded from the jar (each as ``<Name>Request``/``Response``).
JAR_APIS = (
    "ShareGroupHeartbeat",  # 76
    "ShareGroupDescribe",  # 77
    "ShareFetch",  # 78
    "ShareAcknowledge",  # 79
    "DescribeShareGroupOffsets",  # 90
    "AlterShareGroupOffsets",  # 91
    "DeleteShareGroupOffsets",  # 92
    "ConsumerGroupHeartbeat",  # 68
    "ConsumerGroupDescribe",  # 69
)
SCHEMA_PACKAGE = "kafka_jar_message_schemas"

#: ConfigResource type of a group (KIP-848 group configs).
GROUP_RESOURCE = 32

#: AcknowledgementBatch.AcknowledgeTypes (0 is a gap).
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4


@functools.cache
def messages(lib: Path) -> SimpleNamespace:
    """The request and response classes of :data:`JAR_APIS`, from ``lib``'s kafka-clients jar.

    Built once per process (kafka-python keeps one response class per API key).
    """
    jar = next(Path(lib).glob("kafka-clients-*.jar"))
    root = Path(tempfile.mkdtemp(prefix="kafka-schemas-"))
    package = root / SCHEMA_PACKAGE
    package.mkdir()
    (package / "__init__.py").write_text("")
    wanted = {f"{api}{kind}.json" for api in JAR_APIS for kind in ("Request", "Response")}
    with zipfile.ZipFile(jar) as archive:
        for name in archive.namelist():
            if name.startswith("common/message/") and Path(name).name in wanted:
                (package / Path(name).name).write_bytes(archive.read(name))
    sys.path.insert(0, str(root))
    try:
        module = importlib.import_module(SCHEMA_PACKAGE)
    finally:
        sys.path.remove(str(root))
    classes = {}
    for api in JAR_APIS:
        for kind in ("Request", "Response"):
            name = api + kind
            classes[name] = type(name, (ApiMessage,), {"__module__": __name__}, load_json=module)
    return SimpleNamespace(**classes)


def member_id() -> str:
    """A member id as Kafka's clients make them (``Uuid.randomUuid().toString()``)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class ShareWire(RawConnection):
    """A raw connection: ``call(request, version)`` returns the decoded response."""

    def __init__(self, bootstrap: str, client_id: str = "share-tests", timeout: float = 30.0):
        super().__init__(bootstrap, timeout=timeout)
        self.client_id = client_id

    def __enter__(self) -> ShareWire:
        return self

    def call(self, request: ApiMessage, version: int) -> Any:
        correlation_id = self.next_correlation_id()
        request.API_VERSION = version
        request.with_header(correlation_id=correlation_id, client_id=self.client_id)
        self.send(request.encode(header=True, framed=True))
        response_class = request.header.get_response_class()
        response = response_class.decode(self.recv_frame(), version=version, header=True)
        got = response.header.correlation_id
        assert got == correlation_id, f"correlation id {got}, expected {correlation_id}"
        return response

    def topic_id(self, topic: str) -> uuid.UUID:
        """The topic's id, from Metadata v12."""
        request = MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
            allow_auto_topic_creation=False,
        )
        [answer] = self.call(request, 12).topics
        assert answer.error_code == 0, answer
        return answer.topic_id

    def alter_group_configs(self, group: str, **configs: str) -> None:
        """IncrementalAlterConfigs (SET) on a group: ``share_auto_offset_reset="earliest"``."""
        resource = IncrementalAlterConfigsRequest.AlterConfigsResource
        request = IncrementalAlterConfigsRequest(
            resources=[
                resource(
                    resource_type=GROUP_RESOURCE,
                    resource_name=group,
                    configs=[
                        resource.AlterableConfig(
                            name=key.replace("_", "."), config_operation=0, value=value
                        )
                        for key, value in configs.items()
                    ],
                )
            ],
            validate_only=False,
        )
        [answer] = self.call(request, 1).responses
        assert answer.error_code == 0, answer

    def group_configs(self, group: str) -> dict[str, str]:
        """A group's configs (DescribeConfigs v4)."""
        resource = DescribeConfigsRequest.DescribeConfigsResource
        request = DescribeConfigsRequest(
            resources=[
                resource(resource_type=GROUP_RESOURCE, resource_name=group, configuration_keys=None)
            ],
            include_synonyms=False,
            include_documentation=False,
        )
        [result] = self.call(request, 4).results
        assert result.error_code == 0, result
        return {c.name: c.value for c in result.configs}


def wait_group_configs(bootstrap: str, group: str, timeout: float = 30.0, **configs: str) -> None:
    """Wait until the broker describes ``group`` with these configs (Kafka applies a config
    change through its metadata log, so it may show a moment after the alter returned)."""
    want = {key.replace("_", "."): value for key, value in configs.items()}
    deadline = time.monotonic() + timeout
    with ShareWire(bootstrap) as wire:
        while True:
            got = wire.group_configs(group)
            if all(got.get(key) == value for key, value in want.items()):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"group {group} configs {got}, want {want}")
            time.sleep(0.1)


@dataclass
class RawMember:
    """A share-group member driven by hand with ShareGroupHeartbeat."""

    group: str
    topics: list[str]
    member_id: str = field(default_factory=member_id)
    epoch: int = 0
    #: topic id -> partitions, from the last heartbeat answer that carried an assignment.
    assignment: dict[uuid.UUID, list[int]] | None = None

    def heartbeat(self, wire: ShareWire, msg: SimpleNamespace) -> Any:
        """Join (epoch 0, with the subscription) or heartbeat at the current epoch."""
        joining = self.epoch == 0
        request = msg.ShareGroupHeartbeatRequest(
            group_id=self.group,
            member_id=self.member_id,
            member_epoch=self.epoch,
            subscribed_topic_names=self.topics if joining else None,
        )
        answer = wire.call(request, 1)
        assert answer.error_code == 0, answer
        self.epoch = answer.member_epoch
        if answer.assignment is not None:
            self.assignment = {
                tp.topic_id: sorted(tp.partitions) for tp in answer.assignment.topic_partitions
            }
        return answer

    def leave(self, wire: ShareWire, msg: SimpleNamespace) -> Any:
        request = msg.ShareGroupHeartbeatRequest(
            group_id=self.group, member_id=self.member_id, member_epoch=-1
        )
        return wire.call(request, 1)


def settle(
    wire: ShareWire, msg: SimpleNamespace, members: list[RawMember], timeout: float = 30.0
) -> None:
    """Heartbeat ``members`` until each has a non-empty assignment and all are at the
    group's assignment epoch (the coordinator computes assignments asynchronously)."""
    deadline = time.monotonic() + timeout
    for member in members:
        if member.epoch == 0:
            member.heartbeat(wire, msg)
    while True:
        for member in members:
            member.heartbeat(wire, msg)
        [group] = wire.call(
            msg.ShareGroupDescribeRequest(
                group_ids=[members[0].group], include_authorized_operations=False
            ),
            1,
        ).groups
        if (
            group.error_code == 0
            and all(m.assignment for m in members)
            and all(m.epoch == group.assignment_epoch for m in members)
            and group.group_epoch == group.assignment_epoch
        ):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"share group not settled after {timeout} s: {group}")
        time.sleep(0.2)


def fetch_topic(
    msg: SimpleNamespace,
    topic_id: uuid.UUID,
    partition: int = 0,
    acks: list[tuple[int, int, list[int]]] | None = None,
) -> Any:
    """A ShareFetchRequest FetchTopic: one partition, with (first, last, types) batches."""
    topic = msg.ShareFetchRequest.FetchTopic
    batch = topic.FetchPartition.AcknowledgementBatch
    return topic(
        topic_id=topic_id,
        partitions=[
            topic.FetchPartition(
                partition_index=partition,
                acknowledgement_batches=[
                    batch(first_offset=first, last_offset=last, acknowledge_types=types)
                    for first, last, types in acks or []
                ],
            )
        ],
    )


def acknowledge_topic(
    msg: SimpleNamespace,
    topic_id: uuid.UUID,
    partition: int,
    acks: list[tuple[int, int, list[int]]],
) -> Any:
    """A ShareAcknowledgeRequest AcknowledgeTopic: one partition's batches."""
    topic = msg.ShareAcknowledgeRequest.AcknowledgeTopic
    batch = topic.AcknowledgePartition.AcknowledgementBatch
    return topic(
        topic_id=topic_id,
        partitions=[
            topic.AcknowledgePartition(
                partition_index=partition,
                acknowledgement_batches=[
                    batch(first_offset=first, last_offset=last, acknowledge_types=types)
                    for first, last, types in acks
                ],
            )
        ],
    )


def share_fetch(
    msg: SimpleNamespace,
    group: str | None,
    member: str | None,
    epoch: int,
    topics: list[Any],
    *,
    max_wait_ms: int = 100,
    max_records: int = 500,
) -> Any:
    """A ShareFetchRequest (v1+ fields) with small waits."""
    return msg.ShareFetchRequest(
        group_id=group,
        member_id=member,
        share_session_epoch=epoch,
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        max_records=max_records,
        batch_size=max_records,
        topics=topics,
        forgotten_topics_data=[],
    )


def describe_offsets(
    bootstrap: str, msg: SimpleNamespace, group: str, version: int = 1
) -> dict[tuple[str, int], tuple[int, int]]:
    """DescribeShareGroupOffsets of every topic of a group: (topic, partition) ->
    (start offset, lag); AssertionError on any error code."""
    groups = msg.DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup
    with ShareWire(bootstrap) as wire:
        [answer] = wire.call(
            msg.DescribeShareGroupOffsetsRequest(groups=[groups(group_id=group, topics=None)]),
            version,
        ).groups
    assert answer.error_code == 0, answer
    out = {}
    for topic in answer.topics:
        for p in topic.partitions:
            assert p.error_code == 0, answer
            out[(topic.topic_name, p.partition_index)] = (p.start_offset, p.lag)
    return out
