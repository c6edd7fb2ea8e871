"""Apache Kafka's Java tools (kafka-tools, kafka_2.13, pinned in compat-tests/java/pom.xml)."""

from __future__ import annotations

from compat.install import kafka_jars, kafka_version
from compat.suite import Command, PytestSuite, RunContext


class JavaToolsSuite(PytestSuite):
    name = "java-tools"
    title = "Apache Kafka Java tools and clients"
    summary = (
        "Verifiable producer/consumer, console tools with and without a group, "
        "topic/group/config/offset/api-versions commands, perf tools"
    )
    what = (
        "VerifiableProducer/VerifiableConsumer (acks=all, idempotent: every acked value consumed "
        "once); ConsoleProducer/ConsoleConsumer with and without a group; TopicCommand, "
        "ConsumerGroupCommand, ConfigCommand, GetOffsetShell, BrokerApiVersionsCommand; "
        "ProducerPerformance and ConsumerPerformance counts"
    )
    test_timeout = 180.0
    run_timeout = 900.0

    def install(self) -> dict[str, str]:
        self.lib = kafka_jars()
        version = kafka_version()
        return {"kafka-tools": version, "kafka_2.13": version, "kafka-clients": version}

    def command(self, ctx: RunContext) -> Command:
        command = super().command(ctx)
        command.env["COMPAT_KAFKA_LIB"] = str(self.lib)
        return command
