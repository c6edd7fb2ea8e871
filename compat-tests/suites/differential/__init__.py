"""The differential suite: the same scripted scenarios against Apache Kafka and kpybroker."""
