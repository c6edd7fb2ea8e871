"""Fakes of the broker state that ``kpybroker.metrics``' collectors read, and a scrape."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kpybroker.metadata.model import PartitionMetadata, PartitionState, TopicMetadata

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(registry: CollectorRegistry) -> Samples:
    """(sample name, labels) -> value, as a scrape of ``registry`` shows them."""
    text = generate_latest(registry).decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


@dataclass
class FakePartition:
    is_leader: bool = True
    isr: tuple[int, ...] = (0,)
    replicas: tuple[int, ...] = (0,)
    min_insync_replicas: int = 1
    high_watermark: int = 0


@dataclass
class FakeHosted:
    partitions: dict[tuple[str, int], FakePartition] = field(default_factory=dict)


@dataclass
class FakeController:
    active: bool = True


def partition(index: int, leader: int) -> PartitionMetadata:
    return PartitionMetadata(index, (0,), PartitionState(leader, 0, (0,), controller_epoch=1))


@dataclass
class FakeTopology:
    leaders: dict[str, list[int]] = field(default_factory=dict)

    def topics(self) -> dict[str, TopicMetadata]:
        return {
            name: TopicMetadata(
                name, uuid.uuid4(), {i: partition(i, lead) for i, lead in enumerate(leaders)}, {}
            )
            for name, leaders in self.leaders.items()
        }


@dataclass
class FakeLog:
    size: int
    log_start_offset: int
    log_end_offset: int
    segments: list[object]


@dataclass
class FakeLogDirs:
    log_dirs: list[Path]
    online_dirs: list[Path]


@dataclass
class FakeGroups:
    offsets: list[tuple[str, str, int, int]]

    def committed_offsets(self) -> list[tuple[str, str, int, int]]:
        return self.offsets


@dataclass
class FakeConnection:
    listener: str
