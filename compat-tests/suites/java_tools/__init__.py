"""Apache Kafka's own Java tools and clients against kpybroker."""
