"""aiokafka 0.14, in a virtualenv of its own: producers (idempotent too), group consumers, admin,
and SCRAM-SHA-512 over SASL_SSL."""

from __future__ import annotations

from typing import ClassVar

from compat.install import python_env
from compat.suite import PytestSuite

AIOKAFKA_VERSION = "0.14.0"
#: Everything in the virtualenv, pinned (aiokafka's codecs all come from cramjam).
REQUIREMENTS = (
    f"aiokafka=={AIOKAFKA_VERSION}",
    "async-timeout==5.0.1",
    "cramjam==2.14.0",
    "packaging==25.0",
    "typing_extensions==4.15.0",
    "pytest==9.0.2",
    "pytest-timeout==2.4.0",
)


class AiokafkaSuite(PytestSuite):
    name = "aiokafka"
    title = "aiokafka"
    summary = (
        "producers with each codec, idempotent and transactional; a two-member consumer group "
        "with commits; admin; a producer and a consumer group with SCRAM-SHA-512 over SASL_SSL"
    )
    what = (
        "AIOKafkaProducer with each codec and with enable_idempotence (acks=all, concurrent "
        "sends, no duplicates); two AIOKafkaConsumers sharing a group (disjoint assignments, "
        "each record once, commits, resume); admin create/describe/delete; a transactional "
        "producer that commits, aborts and sends offsets, read back read_committed; over "
        "SASL_SSL with SCRAM-SHA-512 and an ssl_context trusting the CA: admin, an idempotent "
        "producer and a two-member group with commits, and a wrong password refused with "
        "Kafka's message"
    )
    # aiokafka has no ACL admin calls: what no ACL governs is allowed (as upstream
    # kafka-python's harness sets it), so the SASL user needs no grants.
    broker_overrides: ClassVar[dict[str, object]] = {"allow.everyone.if.no.acl.found": True}
    secured = True
    test_timeout = 120.0
    run_timeout = 600.0

    def install(self) -> dict[str, str]:
        self.python = str(python_env("aiokafka", REQUIREMENTS))
        return {"aiokafka": AIOKAFKA_VERSION, "cramjam": "2.14.0"}

    def pythonpath(self) -> list:
        # Only the plugin's package: kpybroker is not installed in this virtualenv.
        return super().pythonpath()[:1]
