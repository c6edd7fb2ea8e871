"""KafkaJS against kpybroker (node's test runner; see scenario.test.mjs)."""
