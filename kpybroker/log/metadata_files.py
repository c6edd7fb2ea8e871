"""The small identity files of Kafka's layout: ``partition.metadata``, ``meta.properties``
and the ``.kafka_cleanshutdown`` marker, each read and written in Kafka's own format.
"""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path

from kpybroker.log.checkpoint import atomic_write, fsync_dir
from kpybroker.log.names import CLEAN_SHUTDOWN_FILE, META_PROPERTIES, PARTITION_METADATA

ZERO_UUID = bytes(16)


class InconsistentMetadataError(RuntimeError):
    """A log directory that belongs to another cluster or broker, or is unreadable as such."""


# -- topic ids -------------------------------------------------------------


def uuid_to_str(value: bytes) -> str:
    """Kafka's text form of a UUID: 22 characters of URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(value).rstrip(b"=").decode()


def uuid_from_str(text: str) -> bytes:
    value = base64.urlsafe_b64decode(text + "==")
    if len(value) != 16:
        raise ValueError(f"not a Kafka UUID: {text!r}")
    return value


# -- partition.metadata ---------------------------------------------------


def write_partition_metadata(directory: Path, topic_id: bytes) -> None:
    """``version: 0\\ntopic_id: <id>``, no trailing newline (``PartitionMetadataFileFormatter``)."""
    atomic_write(
        directory / PARTITION_METADATA, f"version: 0\ntopic_id: {uuid_to_str(topic_id)}".encode()
    )


def read_partition_metadata(directory: Path) -> bytes | None:
    """The topic id recorded for a partition, None when the file is absent."""
    path = directory / PARTITION_METADATA
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    try:
        if int(fields["version"]) != 0:
            raise InconsistentMetadataError(f"unknown version in {path}")
        topic_id = uuid_from_str(fields["topic_id"].strip())
    except (KeyError, ValueError) as exc:
        raise InconsistentMetadataError(f"malformed {path}") from exc
    if topic_id == ZERO_UUID:
        raise InconsistentMetadataError(f"zero topic id in {path}")
    return topic_id


# -- meta.properties ------------------------------------------------------


def ensure_meta_properties(log_dir: Path, broker_id: int, cluster_id: str) -> None:
    """Check that ``log_dir`` belongs to this cluster and broker, or claim it if new.

    A new directory gets the ZooKeeper-era version 0 file (``broker.id``), which
    matches kpybroker's ZooKeeper-shaped metadata. A KRaft version 1 file
    (``node.id``) written by Kafka is accepted too.
    """
    path = log_dir / META_PROPERTIES
    try:
        props = parse_properties(path.read_text())
    except FileNotFoundError:
        stamp = time.strftime("%a %b %d %H:%M:%S %Z %Y")
        text = f"#\n#{stamp}\ncluster.id={cluster_id}\nversion=0\nbroker.id={broker_id}\n"
        atomic_write(path, text.encode())
        return
    version = props.get("version")
    id_key = {"0": "broker.id", "1": "node.id"}.get(version or "")
    if id_key is None or id_key not in props:
        raise InconsistentMetadataError(f"{path}: unsupported meta.properties version {version}")
    stored_cluster = props.get("cluster.id")
    if stored_cluster is not None and stored_cluster != cluster_id:
        raise InconsistentMetadataError(
            f"The Cluster ID {cluster_id} doesn't match stored clusterId {stored_cluster} in "
            f"{path}. The broker is trying to join the wrong cluster."
        )
    if int(props[id_key]) != broker_id:
        raise InconsistentMetadataError(
            f"Stored node id {props[id_key]} doesn't match previous node id {broker_id} in {path}."
        )


def parse_properties(text: str) -> dict[str, str]:
    """Java ``.properties`` as Kafka writes them: ``key=value`` lines and ``#`` comments."""
    props = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        key, _, value = line.partition("=")
        props[key.strip()] = value.strip()
    return props


# -- the clean shutdown marker -------------------------------------------


def write_clean_shutdown(log_dir: Path, broker_epoch: int = -1) -> None:
    """``{"broker_epoch":"N","version":"0"}``: Kafka's ``CleanShutdownFileHandler`` payload
    (a Java HashMap of strings, which serialises broker_epoch first)."""
    payload = {"broker_epoch": str(broker_epoch), "version": "0"}
    atomic_write(log_dir / CLEAN_SHUTDOWN_FILE, json.dumps(payload, separators=(",", ":")).encode())


def take_clean_shutdown(log_dir: Path) -> bool:
    """Whether the last shutdown was clean; removes the marker so a later crash is noticed.

    Any content counts: older Kafka versions wrote an empty file. The removal is
    made durable before returning: a marker that reappeared after a later crash
    would make the next start skip recovery.
    """
    path = log_dir / CLEAN_SHUTDOWN_FILE
    if not path.exists():
        return False
    path.unlink()
    fsync_dir(log_dir)
    return True
