"""A pytest plugin loaded into every pytest-driven suite (``-p compat.pytest_plugin``).

It must import nothing but the standard library, pytest, :mod:`compat.results`
and :mod:`compat.security`, because it also runs inside the suites' own
virtualenvs (kafka-python, aiokafka), where kpybroker is not installed.

- Fixtures ``bootstrap`` and ``reference_bootstrap``: the brokers the runner
  started (``COMPAT_BOOTSTRAP``, ``COMPAT_REFERENCE_BOOTSTRAP``).
- Fixture ``security``: a secured broker's other listeners, users and key
  material (``COMPAT_SECURITY``), for suites whose ``Suite.secured`` is set.
- Known failures that would otherwise hang until a client's own timeout (a
  transactional producer waiting 60 s for a coordinator) get the shorter
  ``timeout`` their entry asks for (``COMPAT_TEST_TIMEOUTS``, set by the
  runner), so a known failure costs seconds, not minutes, and a fix still
  shows up as an unexpected pass.
"""

from __future__ import annotations

import fnmatch
import json
import os
import uuid

import pytest

from compat.results import test_identifier
from compat.security import SecuredBroker


def _item_test_id(item: pytest.Item) -> str:
    """The id :func:`compat.results.parse_junit` will give this item."""
    path, *rest = item.nodeid.split("::")
    classname = ".".join([path.removesuffix(".py").replace("/", "."), *rest[:-1]])
    return test_identifier("", classname, item.name)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    timeouts: dict[str, float] = json.loads(os.environ.get("COMPAT_TEST_TIMEOUTS") or "{}")
    if not timeouts:
        return
    for item in items:
        ident = _item_test_id(item)
        for pattern, seconds in timeouts.items():
            if fnmatch.fnmatchcase(ident, pattern):
                item.add_marker(pytest.mark.timeout(seconds))
                break


def _required_env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"{name} is not set: run this suite through compat-tests/run", pytrace=False)
    return value


@pytest.fixture(scope="session")
def bootstrap() -> str:
    """``host:port`` of the broker under test (kpybroker, or Kafka with --target kafka)."""
    return _required_env("COMPAT_BOOTSTRAP")


@pytest.fixture(scope="session")
def reference_bootstrap() -> str:
    """``host:port`` of the reference Apache Kafka (differential suite only)."""
    return _required_env("COMPAT_REFERENCE_BOOTSTRAP")


@pytest.fixture(scope="session")
def security() -> SecuredBroker:
    """The SASL_PLAINTEXT, SASL_SSL and SSL listeners of the broker under test, its users and
    the CA and client certificates (suites with ``secured = True`` only)."""
    described = SecuredBroker.from_env()
    if described is None:
        pytest.fail(
            "COMPAT_SECURITY is not set: run this suite through compat-tests/run, and give it "
            "a secured broker (secured = True on its Suite)",
            pytrace=False,
        )
    return described


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A fresh topic name derived from the test's name (legal characters only)."""
    stem = "".join(c if c.isalnum() or c in "._-" else "-" for c in request.node.name)
    return f"{stem[:180]}-{uuid.uuid4().hex[:8]}"
