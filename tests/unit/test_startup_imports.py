"""Starting the broker loads only what start-up needs.

``cryptography`` (key stores, certificates) and PyJWT with its HTTP client (JWKS) cost about
14 MB of memory and 30 ms of startup; the modules that use them import them where they are
used. The generated encoders and decoders (``kpybroker.protocol.messages.codecs``) are three
quarters of the generated code: each is imported at its messages' first encode or decode.
The request handlers (``kpybroker.apis``) are imported at their API's first request, and
the message classes at their first use. These tests keep a module-level import from
creeping back in.
"""

from __future__ import annotations

import subprocess
import sys

SECURITY_ONLY = ("cryptography", "jwt", "urllib.request", "http.client")
#: ZooKeeper's client (only with ``zookeeper.connect``), and what the crc32c package's
#: ``__init__`` imports (kpybroker.protocol.crc imports it at the first CRC).
NOT_AT_START = ("kazoo", "crc32c", "importlib.metadata")
CODECS = "kpybroker.protocol.messages.codecs."
#: How listeners and the inter-broker client do TLS and SASL: only when one of them does.
LISTENER_SECURITY_ONLY = (
    "kpybroker.security.listener_tls",
    "kpybroker.security.listener_sasl",
    "kpybroker.security.inter_broker_sasl",
    "kpybroker.security.ssl_context",
    "kpybroker.security.sasl.jaas",
    "kpybroker.security.sasl.oauthbearer",
    "kpybroker.security.sasl.plain",
    "kpybroker.security.sasl.scram",
)
#: What answering ApiVersions, the first request of every connection, needs of ``apis``.
APIS_AT_START = {"api_versions", "support"}


def modules_loaded_by_the_broker_command() -> set[str]:
    """What ``import kpybroker.cli`` (``python -m kpybroker``'s imports) leaves loaded."""
    probe = "import sys, kpybroker.cli; print(' '.join(sys.modules))"
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.split()
    return set(loaded)


def test_starting_the_broker_loads_no_tls_or_jwks_library() -> None:
    assert modules_loaded_by_the_broker_command() & set(SECURITY_ONLY) == set()


def test_starting_a_plaintext_broker_loads_no_tls_or_sasl_set_up() -> None:
    assert modules_loaded_by_the_broker_command() & set(LISTENER_SECURITY_ONLY) == set()


def test_starting_the_broker_loads_no_zookeeper_client_nor_crc_library() -> None:
    assert modules_loaded_by_the_broker_command() & set(NOT_AT_START) == set()


def test_starting_the_broker_loads_no_message_codecs() -> None:
    loaded = modules_loaded_by_the_broker_command()
    assert sorted(m for m in loaded if m.startswith(CODECS)) == []


def test_starting_the_broker_loads_no_handler_but_api_versions() -> None:
    loaded = modules_loaded_by_the_broker_command()
    handlers = {m.split(".")[2] for m in loaded if m.startswith("kpybroker.apis.")}
    assert handlers == APIS_AT_START


def test_starting_the_broker_loads_no_message_classes_of_admin_apis() -> None:
    """The admin APIs' message classes, which nothing but their handlers uses."""
    loaded = modules_loaded_by_the_broker_command()
    admin = ("create_topics", "describe_configs", "describe_acls", "elect_leaders")
    assert {f"kpybroker.protocol.messages.{name}" for name in admin} & loaded == set()
