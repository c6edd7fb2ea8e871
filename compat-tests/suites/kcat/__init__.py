"""kcat (librdkafka's command-line client) against kpybroker."""
