"""AlterReplicaLogDirs' answers per partition, as Kafka 4.4's ``alterReplicaLogDirs`` gives
them, with a real log manager over two directories: permission first, then the directory,
then whether the cluster and this broker have the partition."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from kpybroker.log.log_manager import LogManager
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages.alter_replica_log_dirs import (
    AlterReplicaLogDir,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirTopic,
)
from kpybroker.security.acls.model import CLUSTER_NAME, AclOperation, ResourceType
from tests.helpers.fake_services import FakeReplicas, call, services
from tests.unit.test_authz_admin_topics import ALICE, granting

CLUSTER_ID = "Qbc2dFl9TyCgSCW8Y9xsPQ"


def alter(*moves: tuple[str, str, list[int]]) -> AlterReplicaLogDirsRequest:
    return AlterReplicaLogDirsRequest(
        dirs=[
            AlterReplicaLogDir(path=path, topics=[AlterReplicaLogDirTopic(topic, partitions)])
            for path, topic, partitions in moves
        ]
    )


def answers(response) -> dict[tuple[str, int], ErrorCode]:
    return {
        (t.topic_name, p.partition_index): ErrorCode(p.error_code)
        for t in response.results
        for p in t.partitions
    }


def test_errors_per_partition(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    logs = LogManager([first, second], broker_id=0, cluster_id=CLUSTER_ID)
    logs.get_or_create("here", 0, None)
    replicas = FakeReplicas()
    replicas.elsewhere = {("here", 0), ("not-yet", 0)}
    granted = granting((ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.ALTER))
    request = alter(
        (str(tmp_path / "c"), "here", [0]),
        (str(first), "here", [0]),
        (str(second), "not-yet", [0]),
        (str(second), "unknown", [0]),
    )
    for version in (1, 2):
        response = call(
            dataclasses.replace(services(replicas=replicas, authorizer=granted), logs=logs),
            request,
            version,
            principal=ALICE,
        )
        # As Kafka: one answer per partition, for the last directory named for it.
        assert len(answers(response)) == sum(len(t.partitions) for t in response.results)
        assert answers(response) == {
            ("here", 0): ErrorCode.NONE,  # already in that directory: nothing to do
            ("not-yet", 0): ErrorCode.REPLICA_NOT_AVAILABLE,
            ("unknown", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        }
        unknown_dir = call(
            dataclasses.replace(services(replicas=replicas, authorizer=granted), logs=logs),
            alter((str(tmp_path / "c"), "here", [0])),
            version,
            principal=ALICE,
        )
        assert answers(unknown_dir) == {("here", 0): ErrorCode.LOG_DIR_NOT_FOUND}
    # The partition not created yet is remembered: it will be made in the asked directory.
    logs.get_or_create("not-yet", 0, None)
    assert logs.log_dir_of("not-yet", 0) == second
    logs.close()


def test_it_needs_alter_on_the_cluster(tmp_path: Path) -> None:
    refused = call(
        services(authorizer=granting((ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.DESCRIBE))),
        alter((str(tmp_path), "t", [0, 1]), (str(tmp_path / "x"), "u", [2])),
        2,
        principal=ALICE,
    )
    assert answers(refused) == {
        ("t", 0): ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        ("t", 1): ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        ("u", 2): ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    }


def test_an_offline_directory_or_partition_is_a_storage_error(tmp_path: Path) -> None:
    """As Kafka's ``alterReplicaLogDirs``: an offline destination, or a partition whose log
    directory failed here, is KAFKA_STORAGE_ERROR."""
    first, second = tmp_path / "a", tmp_path / "b"
    logs = LogManager([first, second], broker_id=0, cluster_id=CLUSTER_ID)
    replicas = FakeReplicas()
    replicas.elsewhere = {("t", 0), ("t", 1)}
    replicas.offline = {("t", 1)}
    granted = granting((ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.ALTER))
    logs.failures.fail(second, "appending to t-9", OSError(5, "Input/output error"))
    response = call(
        dataclasses.replace(services(replicas=replicas, authorizer=granted), logs=logs),
        alter((str(second), "t", [0]), (str(first), "t", [1])),
        2,
        principal=ALICE,
    )
    assert answers(response) == {
        ("t", 0): ErrorCode.KAFKA_STORAGE_ERROR,
        ("t", 1): ErrorCode.KAFKA_STORAGE_ERROR,
    }
    logs.close()
