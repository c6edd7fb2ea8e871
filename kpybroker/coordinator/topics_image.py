"""The cluster's topics as consumer groups read them, from the metadata cache.

Kafka's group coordinator reads its ``MetadataImage``; this is the same
view over ``ClusterMetadata``: a topic by name or ID, with its partition
count and the racks of each partition's replicas (for rack-aware
assignment). Reads are from the cache; nothing here waits.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from kpybroker.coordinator.interface import TopicImage
from kpybroker.metadata.topic_names import INTERNAL_TOPICS

if TYPE_CHECKING:
    from kpybroker.metadata.cluster_metadata import ClusterMetadata
    from kpybroker.metadata.model import TopicMetadata


class ClusterTopicsImage:
    """``TopicsImage`` over the broker's metadata cache."""

    def __init__(self, cluster: ClusterMetadata) -> None:
        self.cluster = cluster
        # name -> (the cached topic and brokers it was made from, the image): heartbeats
        # read the same topics over and over, and the cache replaces what changes.
        self._images: dict[str, tuple[TopicMetadata, dict[int, str | None], TopicImage]] = {}

    def by_name(self, name: str) -> TopicImage | None:
        topic = self.cluster.topics().get(name)
        if topic is None:
            self._images.pop(name, None)
            return None
        racks = {b.broker_id: b.rack for b in self.cluster.live_brokers().values()}
        cached = self._images.get(name)
        if cached is not None and cached[0] is topic and cached[1] == racks:
            return cached[2]
        image = self._image(topic, racks)
        self._images[name] = (topic, racks, image)
        return image

    def by_id(self, topic_id: bytes) -> TopicImage | None:
        name = self.cluster.topic_name(topic_id)
        return None if name is None else self.by_name(name)

    def names(self) -> Iterable[str]:
        return self.cluster.topics().keys()

    def is_internal(self, name: str) -> bool:
        return name in INTERNAL_TOPICS

    @staticmethod
    def _image(topic: TopicMetadata, racks: dict[int, str | None]) -> TopicImage:
        by_partition = []
        for index in range(len(topic.partitions)):
            partition = topic.partitions.get(index)
            replicas = partition.replicas if partition is not None else ()
            by_partition.append(
                frozenset(rack for b in replicas if (rack := racks.get(b)) is not None)
            )
        return TopicImage(
            topic.topic_id.bytes, topic.name, len(topic.partitions), tuple(by_partition)
        )
