"""KafkaJS, pinned by package-lock.json, run with node's own test runner (PLAINTEXT, and SASL
with and without TLS)."""

from __future__ import annotations

import json
import subprocess

from compat.install import InstallError, ensure_commands, npm_modules
from compat.suite import Command, RunContext, Suite

#: Node's major version the scenario is written for (Debian bookworm ships 18;
#: the machines have 20). The JUnit reporter needs 20.11 or later.
NODE_MAJOR = 20


class KafkaJsSuite(Suite):
    name = "kafkajs"
    title = "KafkaJS"
    summary = (
        "admin, gzip, idempotent and transactional producers, a consumer group with auto and "
        "manual commits; a producer and a consumer group with SCRAM-SHA-256 over "
        "SASL_PLAINTEXT and with PLAIN over SASL_SSL"
    )
    what = (
        "admin createTopics/fetchTopicMetadata/fetchOffsets/setOffsets/describeGroups/"
        "deleteGroups/deleteTopics; gzip and idempotent producers (acks=-1); a consumer group "
        "reading everything once, auto and manual commits, resume from a commit; a "
        "transaction committing records and group offsets, and an aborted one left unread; "
        "with SCRAM-SHA-256 over SASL_PLAINTEXT and with PLAIN over SASL_SSL (ssl.ca): a super "
        "user's createAcls/describeAcls granting a user a topic and a group, then that user's "
        "producer and consumer group"
    )
    secured = True
    run_timeout = 300.0

    def install(self) -> dict[str, str]:
        ensure_commands({"node": "nodejs", "npm": "npm"})
        node = subprocess.run(["node", "--version"], capture_output=True, text=True, check=False)
        version = node.stdout.strip().lstrip("v")
        if not version.startswith(f"{NODE_MAJOR}."):
            raise InstallError(f"node {version or '?'} found; this suite needs node {NODE_MAJOR}")
        self.node_modules = npm_modules("kafkajs", self.directory)
        manifest = json.loads((self.node_modules / "kafkajs" / "package.json").read_text())
        return {"kafkajs": manifest["version"], "node": version}

    def command(self, ctx: RunContext) -> Command:
        args = [
            "node", "--test", "--test-reporter=spec", "--test-reporter-destination=stdout",
            "--test-reporter=junit", f"--test-reporter-destination={ctx.junit_path}",
        ]  # fmt: skip
        if ctx.selection:
            args.append(f"--test-name-pattern={ctx.selection}")
        args.append(str(self.directory / "scenario.test.mjs"))
        env = ctx.env()
        env["COMPAT_NODE_MODULES"] = str(self.node_modules)
        env["KAFKAJS_NO_PARTITIONER_WARNING"] = "1"
        return Command(args, env, self.directory)
