"""Every suite, in the order ``compat-tests/run`` runs them and the report lists them.

The quick suites come first, so a broken broker shows up within a minute.
"""

from __future__ import annotations

from compat.suite import Suite
from suites.aiokafka_client.suite import AiokafkaSuite
from suites.differential.suite import DifferentialSuite
from suites.franz_go.suite import FranzGoSuite
from suites.java_tools.suite import JavaToolsSuite
from suites.kafka_python.suite import KafkaPythonSuite
from suites.kafkajs.suite import KafkaJsSuite
from suites.kcat.suite import KcatSuite

SUITE_CLASSES: tuple[type[Suite], ...] = (
    KcatSuite,
    AiokafkaSuite,
    KafkaJsSuite,
    FranzGoSuite,
    KafkaPythonSuite,
    JavaToolsSuite,
    DifferentialSuite,
)


def all_suites() -> list[Suite]:
    """One instance of every suite."""
    return [cls() for cls in SUITE_CLASSES]
