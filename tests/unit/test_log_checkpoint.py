"""Kafka's text checkpoints and identity files, byte for byte."""

import json

import pytest

from kpybroker.log.checkpoint import (
    CorruptCheckpointError,
    read_epoch_checkpoint,
    read_offset_checkpoint,
    write_epoch_checkpoint,
    write_offset_checkpoint,
)
from kpybroker.log.metadata_files import (
    InconsistentMetadataError,
    ensure_meta_properties,
    parse_properties,
    read_partition_metadata,
    take_clean_shutdown,
    uuid_from_str,
    uuid_to_str,
    write_clean_shutdown,
    write_partition_metadata,
)

TOPIC_ID = bytes(range(16))


def test_offset_checkpoint_is_kafkas_text_format(tmp_path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    write_offset_checkpoint(path, {("orders", 1): 977, ("orders", 0): 1523})
    assert path.read_bytes() == b"0\n2\norders 1 977\norders 0 1523\n"  # the mapping's order
    assert read_offset_checkpoint(path) == {("orders", 0): 1523, ("orders", 1): 977}
    assert not list(tmp_path.glob("*.tmp"))


def test_empty_and_missing_checkpoints(tmp_path) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    assert read_offset_checkpoint(path) == {}
    write_offset_checkpoint(path, {})
    assert path.read_bytes() == b"0\n0\n"
    assert read_offset_checkpoint(path) == {}
    path.write_bytes(b"")
    assert read_offset_checkpoint(path) == {}


def test_checkpoint_keeps_topic_names_with_dots_and_dashes(tmp_path) -> None:
    path = tmp_path / "cp"
    write_offset_checkpoint(path, {("a.b-c", 12): 5})
    assert path.read_bytes() == b"0\n1\na.b-c 12 5\n"
    assert read_offset_checkpoint(path) == {("a.b-c", 12): 5}


@pytest.mark.parametrize(
    "text",
    [b"1\n0\n", b"0\n2\nt 0 1\n", b"0\n1\nt 0\n", b"0\n1\nt x 1\n", b"zero\n"],
    ids=["version", "count", "fields", "number", "header"],
)
def test_corrupt_checkpoints_raise(tmp_path, text) -> None:
    path = tmp_path / "cp"
    path.write_bytes(text)
    with pytest.raises(CorruptCheckpointError):
        read_offset_checkpoint(path)


def test_leader_epoch_checkpoint_format(tmp_path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    write_epoch_checkpoint(path, [(0, 0), (3, 120)])
    assert path.read_bytes() == b"0\n2\n0 0\n3 120\n"
    assert read_epoch_checkpoint(path) == [(0, 0), (3, 120)]


def test_partition_metadata_is_kafkas_format(tmp_path) -> None:
    write_partition_metadata(tmp_path, TOPIC_ID)
    assert (
        tmp_path / "partition.metadata"
    ).read_bytes() == b"version: 0\ntopic_id: AAECAwQFBgcICQoLDA0ODw"
    assert read_partition_metadata(tmp_path) == TOPIC_ID
    assert read_partition_metadata(tmp_path / "missing") is None


def test_uuid_text_form_is_22_chars_of_url_safe_base64() -> None:
    value = bytes([0xFB, 0xFF] * 8)
    text = uuid_to_str(value)
    assert len(text) == 22 and "+" not in text and "/" not in text and "=" not in text
    assert uuid_from_str(text) == value


def test_zero_topic_id_in_partition_metadata_is_rejected(tmp_path) -> None:
    (tmp_path / "partition.metadata").write_text("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA")
    with pytest.raises(InconsistentMetadataError):
        read_partition_metadata(tmp_path)


def test_clean_shutdown_marker_is_kafkas_json_and_is_consumed(tmp_path) -> None:
    write_clean_shutdown(tmp_path, 7)
    marker = tmp_path / ".kafka_cleanshutdown"
    assert marker.read_bytes() == b'{"broker_epoch":"7","version":"0"}'
    assert json.loads(marker.read_text()) == {"broker_epoch": "7", "version": "0"}
    assert take_clean_shutdown(tmp_path)
    assert not marker.exists()
    assert not take_clean_shutdown(tmp_path)


def test_empty_clean_shutdown_marker_of_old_kafka_counts(tmp_path) -> None:
    (tmp_path / ".kafka_cleanshutdown").write_bytes(b"")
    assert take_clean_shutdown(tmp_path)


def test_meta_properties_written_as_version_0_and_checked(tmp_path) -> None:
    ensure_meta_properties(tmp_path, 1, "Qbc2dFl9TyCgSCW8Y9xsPQ")
    props = parse_properties((tmp_path / "meta.properties").read_text())
    assert props == {"version": "0", "broker.id": "1", "cluster.id": "Qbc2dFl9TyCgSCW8Y9xsPQ"}
    ensure_meta_properties(tmp_path, 1, "Qbc2dFl9TyCgSCW8Y9xsPQ")
    with pytest.raises(InconsistentMetadataError, match="wrong cluster"):
        ensure_meta_properties(tmp_path, 1, "another-cluster-id-xyz")
    with pytest.raises(InconsistentMetadataError, match="node id"):
        ensure_meta_properties(tmp_path, 2, "Qbc2dFl9TyCgSCW8Y9xsPQ")


def test_kraft_meta_properties_written_by_kafka_are_accepted(tmp_path) -> None:
    (tmp_path / "meta.properties").write_text(
        "#\n#Tue Oct 01 10:00:00 UTC 2024\nnode.id=3\ndirectory.id=mW1tXhpNT1aXTFWXlbTMXA\n"
        "version=1\ncluster.id=Qbc2dFl9TyCgSCW8Y9xsPQ\n"
    )
    ensure_meta_properties(tmp_path, 3, "Qbc2dFl9TyCgSCW8Y9xsPQ")
    with pytest.raises(InconsistentMetadataError):
        ensure_meta_properties(tmp_path, 4, "Qbc2dFl9TyCgSCW8Y9xsPQ")
