"""File and directory names of Kafka's on-disk layout (``LogFileUtils``, ``LocalLog``).

Kept in one place so that every module spells them the same way, and so that
a directory written by kpybroker can be read by Kafka and the reverse.
"""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
SNAPSHOT_SUFFIX = ".snapshot"
TXN_INDEX_SUFFIX = ".txnindex"
DELETED_SUFFIX = ".deleted"
TEMP_SUFFIX = ".tmp"
# Compaction writes a group's replacement as `<base>.log.cleaned` (and indexes), renames
# it to `.swap` once complete and fsynced, then to its final name (LocalLog.replaceSegments).
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
META_PROPERTIES = "meta.properties"
LOCK_FILE = ".lock"
# The built-in metadata store's directory, when it lives in a log directory.
METADATA_STORE_DIR = "kpybroker-metadata"

# `<topic>-<partition>.<32 hex>-delete` (also -future, -stray): LocalLog's special dirs.
_SPECIAL_DIR = re.compile(
    r"^(?P<topic>.+)-(?P<partition>\d+)\.[0-9a-f]{32}-(?P<kind>delete|future|stray)$"
)


def filename_prefix(offset: int) -> str:
    """The 20-digit zero-padded offset that names segment, index and snapshot files."""
    return f"{offset:020d}"


def segment_file(directory: Path, base_offset: int, suffix: str, temp_suffix: str = "") -> Path:
    """``<base><suffix>``, e.g. ``00000000000000000042.index``; ``temp_suffix`` appends
    ``.cleaned``/``.swap``/``.deleted`` as Kafka's ``LogFileUtils`` does."""
    return directory / (filename_prefix(base_offset) + suffix + temp_suffix)


def names_ending(directory: Path, suffix: str) -> list[str]:
    """Names of the files in ``directory`` that end with ``suffix``, none when it is gone (as
    ``Path.glob``, which costs ten times more, paid several times per partition at load)."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return [name for name in names if name.endswith(suffix)]


def offset_from_filename(name: str) -> int | None:
    """The offset in ``00000000000000000042.log`` style names, or None if not one."""
    prefix = name.split(".", 1)[0]
    if len(prefix) != 20 or not prefix.isdigit():
        return None
    return int(prefix)


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """Split ``<topic>-<partition>`` at the last '-' (topic names may contain '-' and '.')."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


def special_dir_kind(name: str) -> str | None:
    """``delete``, ``future`` or ``stray`` for LocalLog's renamed directories, else None."""
    match = _SPECIAL_DIR.match(name)
    return match.group("kind") if match else None


def delete_dir_name(partition_dir: str) -> str:
    """``<topic>-<partition>.<uuid hex>-delete``: the name a directory takes while it is removed."""
    return f"{partition_dir}.{uuid.uuid4().hex}-delete"


def stray_dir_name(partition_dir: str) -> str:
    """``<topic>-<partition>.<uuid hex>-stray``: a log set aside, kept but never loaded again."""
    return f"{partition_dir}.{uuid.uuid4().hex}-stray"


def future_dir_name(partition_dir: str) -> str:
    """``<topic>-<partition>.<uuid hex>-future``: a log being filled in another log directory
    (AlterReplicaLogDirs), which takes the partition's name once complete."""
    return f"{partition_dir}.{uuid.uuid4().hex}-future"
