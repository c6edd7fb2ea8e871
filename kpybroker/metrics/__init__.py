"""The broker's Prometheus metrics, named as the JMX exporter names Kafka's MBeans.

What the request path counts (``topic_stats``, ``request_stats``) is kept in plain
integers, a few additions per request or per partition, and turned into metric
families only when Prometheus scrapes; what follows from the broker's state (log
sizes, under-replicated partitions, group lag, connections) is read at scrape time
by collectors that see it through narrow interfaces. ``registry`` puts them in one
registry per broker, built only when the broker serves its metrics (the counting
needs neither prometheus_client nor aiohttp); ``docs/metrics.md`` lists every name.
"""
