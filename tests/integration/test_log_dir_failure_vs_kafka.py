"""A failed log directory answers as on Apache Kafka, whole answers compared.

``tests/helpers/log_dir_diff`` runs one scenario (two log dirs, one on a loop
ext4 shut down with EIO; then Produce acks=1 and acks=-1, Fetch, ListOffsets,
Metadata, DescribeLogDirs v1-v4, DescribeTopicPartitions, CreateTopics,
AlterReplicaLogDirs) on kpybroker and on Kafka 4.4, with its defaults and
without eligible leader replicas, and records every field of every answer.
Any difference must be one docs/log-dir-failure.md explains ("Against Apache
Kafka"). Needs root for the loop mount (skipped otherwise) and Kafka's jars.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.log_dir_diff import TARGETS, observe, unexplained

pytestmark = pytest.mark.timeout(300)


def test_the_answers_on_a_failed_log_dir_are_kafkas(tmp_path: Path, kafka_lib: Path) -> None:
    answers = {kind: observe(kind, tmp_path / kind, kafka_lib) for kind in TARGETS}
    ours = answers.pop("kpybroker")
    # The scenario reached the failed state on every broker.
    for observed in (ours, *answers.values()):
        assert (
            observed["failed/produce acks=1/responses[0]/partition_responses[0]/error_code"] == 56
        )
    problems = [
        line for kafka, theirs in answers.items() for line in unexplained(kafka, ours, theirs)
    ]
    assert not problems, "\n".join(problems)
