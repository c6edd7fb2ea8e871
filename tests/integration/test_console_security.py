"""The web console of a secured broker: behind the broker's authentication, under its ACLs.

One secured broker (``tests/helpers/secure_broker.py``: SASL and TLS listeners, ACLs on,
``admin`` the super user) serves the console over HTTPS with its own key store, admin
actions on. ``admin`` adds SCRAM users and ACLs with the admin APIs; then the console is
asked over HTTPS with HTTP Basic credentials, and looked at in headless Chromium.
"""

from __future__ import annotations

import asyncio
import base64
import re
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.helpers.brokers import ManagedBroker, selected_target
from tests.helpers.chromium import Chromium, chromium_path
from tests.helpers.process import wait_until
from tests.helpers.secure_broker import USERS, Credentials
from tests.helpers.secure_clients import acl, add_acls, new_topic, running_secure_broker
from tests.integration.test_console import cells

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(selected_target() != "kpybroker", reason="the console is kpybroker's"),
]

SERVING = re.compile(r"console\.listeners: serving HTTP on (https://\S+)")
CONSOLE = {
    "console.enable": "true",
    "console.listeners": "https://127.0.0.1:0",
    "console.admin.enable": "true",
}
FAILED = "Failed authentication with 127.0.0.1 (console: "


@pytest.fixture(scope="module")
def credentials(tmp_path_factory: pytest.TempPathFactory) -> Credentials:
    return Credentials(tmp_path_factory.mktemp("credentials"))


@pytest.fixture(scope="module")
def secured(
    tmp_path_factory: pytest.TempPathFactory, credentials: Credentials
) -> Iterator[ManagedBroker]:
    with running_secure_broker(tmp_path_factory.mktemp("console"), credentials, CONSOLE) as broker:
        yield broker


@pytest.fixture(scope="module")
def topics(secured: ManagedBroker) -> tuple[str, str]:
    """Two topics: alice may describe the first only; bob may create topics."""
    seen, hidden = new_topic(secured), new_topic(secured)
    add_acls(
        secured,
        acl("TOPIC", seen, "alice", "DESCRIBE"),
        acl("TOPIC", "bob-", "bob", "CREATE", pattern="PREFIXED"),
    )
    return seen, hidden


def console_url(broker: ManagedBroker) -> str:
    match = SERVING.search(broker.log_text())
    assert match, "the broker did not log its console address"
    return match.group(1)


def basic(user: str, password: str | None = None) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password or USERS[user]}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


async def ask(
    credentials: Credentials, url: str, method: str = "GET", **kwargs: Any
) -> tuple[int, Any]:
    """One request over HTTPS, the broker's certificate checked against the test CA."""
    tls = ssl.create_default_context(cafile=str(credentials.ca_pem))
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, url, ssl=tls, **kwargs) as answer,
    ):
        json = answer.content_type == "application/json"
        return answer.status, await (answer.json() if json else answer.text())


def test_no_or_wrong_credentials_are_refused_and_logged(
    secured: ManagedBroker, credentials: Credentials
) -> None:
    url = console_url(secured)
    for path in ("/", "/static/console.js", "/api/topics"):
        status, _ = asyncio.run(ask(credentials, f"{url}{path}"))
        assert status == 401, path
    before = secured.log_text().count(FAILED)
    status, _ = asyncio.run(ask(credentials, f"{url}/api/topics", headers=basic("alice", "nope")))
    assert status == 401
    # The broker logs before it answers, but a thread reads its output: wait for it.
    wait_until(lambda: secured.log_text().count(FAILED) > before, 30, message="the logged failure")
    log = secured.log_text()
    assert log.count(FAILED) == before + 1
    assert "nope" not in log


def test_users_see_the_topics_their_acls_let_them_describe(
    secured: ManagedBroker, credentials: Credentials, topics: tuple[str, str]
) -> None:
    url = console_url(secured)
    seen, hidden = topics

    def names(user: str) -> set[str]:
        status, body = asyncio.run(ask(credentials, f"{url}/api/topics", headers=basic(user)))
        assert status == 200, body
        return {t["name"] for t in body}

    assert seen in names("alice") and hidden not in names("alice")
    assert names("bob").isdisjoint({seen, hidden})
    assert {seen, hidden} <= names("admin")  # the super user
    status, _ = asyncio.run(ask(credentials, f"{url}/api/topics/{hidden}", headers=basic("alice")))
    assert status == 404


def test_admin_actions_need_the_acls_kafka_asks_for(
    secured: ManagedBroker, credentials: Credentials, topics: tuple[str, str]
) -> None:
    url = f"{console_url(secured)}/api/topics"
    refused = asyncio.run(
        ask(credentials, url, "POST", json={"name": "bob-alice"}, headers=basic("alice"))
    )
    assert refused == (
        400,
        {"error": "TOPIC_AUTHORIZATION_FAILED", "message": refused[1]["message"]},
    )
    made = asyncio.run(
        ask(
            credentials,
            url,
            "POST",
            json={"name": "bob-made", "partitions": 1},
            headers=basic("bob"),
        )
    )
    assert made == (200, {"error": None, "message": None})
    deleted = asyncio.run(ask(credentials, f"{url}/bob-made", "DELETE", headers=basic("bob")))
    assert deleted[0] == 400 and deleted[1]["error"] == "TOPIC_AUTHORIZATION_FAILED"
    deleted = asyncio.run(ask(credentials, f"{url}/bob-made", "DELETE", headers=basic("admin")))
    assert deleted == (200, {"error": None, "message": None})  # the super user may


@pytest.mark.skipif(chromium_path() is None, reason="Debian's chromium is not installed")
def test_the_pages_in_chromium_with_credentials(
    secured: ManagedBroker, topics: tuple[str, str], tmp_path: Path
) -> None:
    with Chromium(tmp_path / "chromium") as chromium:
        asyncio.run(look_as_alice(chromium, console_url(secured), topics))


async def look_as_alice(chromium: Chromium, url: str, topics: tuple[str, str]) -> None:
    """Logged in as a browser does from ``https://user:password@host/``: the navigation
    authenticates, and the page's own calls reuse the credentials Chromium keeps."""
    seen, hidden = topics
    names = cells("topics", "name")
    with_credentials = url.replace("https://", f"https://alice:{USERS['alice']}@", 1)
    async with aiohttp.ClientSession() as session:
        page = await chromium.page(session)
        await page.send("Security.setIgnoreCertificateErrors", ignore=True)  # the test CA's
        await page.navigate(f"{with_credentials}/#/topics")
        await page.wait_for(f"{names}.includes('{seen}')")
        assert hidden not in await page.evaluate(names)
        await page.navigate(f"{url}/#/")
        await page.wait_for(f"{cells('brokers', 'id')}.length === 1")
        assert await page.evaluate("document.getElementById('status').className") == ""
