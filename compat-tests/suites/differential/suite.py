"""The differential suite: scripted raw-protocol scenarios against Apache Kafka and kpybroker."""

from __future__ import annotations

from typing import ClassVar

from compat.install import kafka_jars, kafka_version
from compat.suite import Command, PytestSuite, RunContext
from tests.helpers.reference_kafka import SINGLE_NODE_DEFAULTS

from .allowlist import KINDS, load


class DifferentialSuite(PytestSuite):
    name = "differential"
    title = "Differential against Apache Kafka"
    summary = (
        "raw-protocol scenarios against Kafka and kpybroker: error codes, ApiVersions, "
        "metadata, offsets, group states, config defaults, SASL and ACLs"
    )
    what = (
        "the same raw-protocol scenarios against a fresh Apache Kafka (KRaft, one node) and "
        "kpybroker, comparing error codes for bad requests (unknown topic, invalid partition "
        "count, out-of-range offset, oversized batch, bad CRC, wrong generation...), ApiVersions "
        "ranges, metadata shape, offsets after each step, group states and DescribeConfigs "
        "defaults, and, against a second pair secured alike (TLS, SASL, ACLs), each SASL step "
        "and every API refused, allowed and refused again by ACLs; differences fail unless "
        "allowlisted with a reason"
    )
    needs_reference = True
    # kpybroker gets the settings the reference Kafka runs with, so that
    # config values and group timings are comparable.
    # Both brokers are also told their node id and advertised listener, which
    # the reference's server.properties sets (so both report them as static).
    broker_overrides: ClassVar[dict[str, object]] = {
        **SINGLE_NODE_DEFAULTS,
        "broker.id": 0,
        "node.id": 0,
        "advertised.listeners": "PLAINTEXT://{host}:{port}",
        # Kafka 4.4 finalizes transaction.version 2 and verifies each partition of a
        # transactional write with its coordinator (KIP-890 part 1); kpybroker serves
        # transaction version 1. Off on both, so both run the same protocol.
        "transaction.partition.verification.enable": "false",
    }
    test_timeout = 120.0
    run_timeout = 600.0

    def command(self, ctx: RunContext) -> Command:
        """Failed scenarios are not run again: a second run meets the topics, groups and
        offsets the first left on both brokers, so its passing proves nothing (a scenario
        with real differences passed that way, and would have counted as merely flaky)."""
        command = super().command(ctx)
        command.failed_only = None
        return command

    def install(self) -> dict[str, str]:
        kafka_jars()
        return {"Apache Kafka (reference)": kafka_version()}

    def notes(self) -> list[str]:
        """The allowlist, broker bugs first: they are known failures in all but name."""
        entries = load()
        if not entries:
            return ["Allowed differences: none."]
        lines = [f"Allowed differences ({len(entries)} entries in `allowlist.toml`), by kind:"]
        for kind in ("broker-bug", *(k for k in KINDS if k != "broker-bug")):
            chosen = [e for e in entries if e.kind == kind]
            if chosen:
                lines += ["", f"{kind} ({len(chosen)}):", ""]
                lines += [f"- {entry.describe()}" for entry in chosen]
        return lines

    def annotations(self) -> dict[str, int]:
        entries = load()
        counts = {"allowed differences": len(entries)}
        counts["of them broker bugs"] = sum(e.kind == "broker-bug" for e in entries)
        return counts
