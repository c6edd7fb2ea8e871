"""What one broker's request path counts: the counters and the event-loop lag sampler.

Plain Python, without prometheus_client: a broker whose ``metrics.listeners`` is empty
counts (a few additions per request) but never loads prometheus_client or aiohttp.
``metrics.registry`` gives them, with the state gauges, to a registry when the broker
serves its metrics.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from kpybroker.metrics.event_loop import EventLoopLag
from kpybroker.metrics.request_stats import RequestStats
from kpybroker.metrics.topic_stats import BrokerTopicStats


class BrokerMetrics:
    """The counters the request path adds to, and the event-loop lag sampler."""

    def __init__(self, known_topics: Callable[[], Collection[str]]) -> None:
        self.topics = BrokerTopicStats(known_topics)
        self.requests = RequestStats()
        self.event_loop = EventLoopLag()
