"""Kafka's ``BrokerTopicMetrics``: messages and bytes in and out, produce and fetch counts.

Counted once per partition of a request (never per record), for the topic and for
all topics, as Kafka keeps one meter per topic and one without a topic. Prometheus
sees each counter as the JMX exporter makes of Kafka's ``...PerSec`` meters:
``kafka_server_brokertopicmetrics_<name>_total``, with a ``topic`` label, and once
more without it for all topics (so a dashboard sums ``{topic!=""}``, as for Kafka).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prometheus_client.core import CounterMetricFamily

PREFIX = "kafka_server_brokertopicmetrics_"


class TopicCounts:
    """The counters of one topic, or of all topics."""

    __slots__ = (
        "bytes_in",
        "bytes_out",
        "failed_fetch_requests",
        "failed_produce_requests",
        "messages_in",
        "total_fetch_requests",
        "total_produce_requests",
    )

    def __init__(self) -> None:
        self.messages_in = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.total_produce_requests = 0
        self.failed_produce_requests = 0
        self.total_fetch_requests = 0
        self.failed_fetch_requests = 0


#: (Prometheus name after the prefix, TopicCounts attribute, help): Kafka's meter names.
COUNTERS = (
    ("messagesin", "messages_in", "Records appended by produce requests (MessagesInPerSec)."),
    ("bytesin", "bytes_in", "Bytes of batches appended by produce requests (BytesInPerSec)."),
    ("bytesout", "bytes_out", "Bytes of records sent to consumers (BytesOutPerSec)."),
    ("totalproducerequests", "total_produce_requests",
     "Partitions written to by produce requests (TotalProduceRequestsPerSec)."),
    ("failedproducerequests", "failed_produce_requests",
     "Partitions whose append failed (FailedProduceRequestsPerSec)."),
    ("totalfetchrequests", "total_fetch_requests",
     "Partitions read by fetch requests (TotalFetchRequestsPerSec)."),
    ("failedfetchrequests", "failed_fetch_requests",
     "Partitions whose read failed (FailedFetchRequestsPerSec)."),
)  # fmt: skip


class BrokerTopicStats:
    """Per-topic and all-topics counters, added to by the produce and fetch handlers.

    ``known_topics`` (the cluster's topic names) lets a scrape forget the counters of
    topics deleted since, as Kafka removes a topic's meters with the topic.
    """

    def __init__(self, known_topics: Callable[[], Collection[str]]) -> None:
        self.known_topics = known_topics
        self.all_topics = TopicCounts()
        self.topics: dict[str, TopicCounts] = {}
        #: Bytes sent to follower replicas (ReplicationBytesOutPerSec; all topics only).
        self.replication_bytes_out = 0

    def of(self, topic: str) -> TopicCounts:
        counts = self.topics.get(topic)
        if counts is None:
            counts = self.topics[topic] = TopicCounts()
        return counts

    def produced(self, topic: str, records: int, size: int) -> None:
        """A batch of ``records`` records, ``size`` bytes, appended to a partition of ``topic``."""
        for counts in (self.of(topic), self.all_topics):
            counts.total_produce_requests += 1
            counts.messages_in += records
            counts.bytes_in += size

    def produce_errored(self, topic: str, *, failed: bool) -> None:
        """A partition's append answered with an error; ``failed`` unless it is one Kafka
        does not count as a failure (the partition is elsewhere, the batch too large...)."""
        for counts in (self.of(topic), self.all_topics):
            counts.total_produce_requests += 1
            counts.failed_produce_requests += failed

    def fetched(self, topic: str, size: int, *, failed: bool, follower: bool) -> None:
        """A partition of ``topic`` answered to a fetch with ``size`` bytes of records."""
        if follower:
            self.replication_bytes_out += size
            size = 0
        for counts in (self.of(topic), self.all_topics):
            counts.total_fetch_requests += 1
            counts.failed_fetch_requests += failed
            counts.bytes_out += size

    def collect(self) -> Iterator[CounterMetricFamily]:
        """The counters as metric families (a prometheus_client collector)."""
        from prometheus_client.core import CounterMetricFamily

        known = self.known_topics()
        for gone in [topic for topic in self.topics if topic not in known]:
            del self.topics[gone]
        for name, attribute, documentation in COUNTERS:
            family = CounterMetricFamily(PREFIX + name, documentation, labels=["topic"])
            for topic, counts in self.topics.items():
                family.add_metric([topic], getattr(counts, attribute))
            family.add_metric([], getattr(self.all_topics, attribute))
            yield family
        yield CounterMetricFamily(
            PREFIX + "replicationbytesout",
            "Bytes of records sent to follower replicas (ReplicationBytesOutPerSec).",
            value=self.replication_bytes_out,
        )
