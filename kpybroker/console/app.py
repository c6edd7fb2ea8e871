"""The console's HTTP application: JSON endpoints, the static page, the sampler's task.

    GET    /api/cluster           brokers, controller, cluster id
    GET    /api/topics            topics with partitions, offsets, sizes
    GET    /api/topics/{name}     one topic
    GET    /api/groups            groups with type, state, members, lag
    GET    /api/groups/{id}       one group: members, assignments, offsets, lag
    GET    /api/throughput        the last five minutes of records/s, bytes/s, latency
    POST   /api/topics            create a topic: {"name", "partitions", "replication_factor"}
    DELETE /api/topics/{name}     delete a topic
    DELETE /api/groups/{id}       delete a group

Each request's Kafka calls act as its user (``authentication``), from its address, so
ACLs decide what it sees and changes. The changes answer 403 unless
``console.admin.enable``; they take JSON only, and refuse a request whose ``Origin`` is
not the console itself, so that a page elsewhere cannot make a visitor's browser send
them.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from kpybroker.apis.support.context import Services
from kpybroker.console.admin import DEFAULT, Outcome, create_topic, delete_group, delete_topic
from kpybroker.console.authentication import BasicAuthentication, principal_of
from kpybroker.console.cluster_view import describe_cluster, describe_topics, topic_names
from kpybroker.console.groups_view import describe_group, group_type, list_groups
from kpybroker.console.kafka_calls import InProcessKafka, KafkaCalls, KafkaCallsAs
from kpybroker.console.settings import ConsoleSettings
from kpybroker.console.throughput import RequestLatency, ThroughputSampler, TopicTotals
from kpybroker.server.http_listener import HttpListener, bounded_application, start_http_listener

#: The page, its script and style: package data (pyproject.toml), no build step.
STATIC = Path(__file__).parent / "static"
KAFKA_CALLS_AS: web.AppKey[KafkaCallsAs] = web.AppKey("kafka_calls_as")
SAMPLER: web.AppKey[ThroughputSampler] = web.AppKey("sampler", ThroughputSampler)
ADMIN: web.AppKey[bool] = web.AppKey("admin", bool)


def _json(data: Any, status: int = 200) -> web.Response:
    return web.json_response(data, status=status, dumps=lambda d: json.dumps(d, default=str))


def kafka(request: web.Request) -> KafkaCalls:
    """The Kafka calls of this request: as its user, from its address."""
    return request.app[KAFKA_CALLS_AS](principal_of(request), request.remote or "")


async def cluster(request: web.Request) -> web.Response:
    answer = await describe_cluster(kafka(request))
    return _json(answer | {"admin": request.app[ADMIN]})


async def topics(request: web.Request) -> web.Response:
    return _json(await describe_topics(kafka(request)))


async def topic(request: web.Request) -> web.Response:
    found = await describe_topics(kafka(request), [request.match_info["name"]])
    if not found:
        return _json({"error": "UNKNOWN_TOPIC_OR_PARTITION"}, status=404)
    return _json(found[0])


async def groups(request: web.Request) -> web.Response:
    return _json(await list_groups(kafka(request)))


async def group(request: web.Request) -> web.Response:
    calls, group_id = kafka(request), request.match_info["group_id"]
    kind = await group_type(calls, group_id)
    if kind is None:
        return _json({"error": "GROUP_ID_NOT_FOUND"}, status=404)
    return _json(await describe_group(calls, group_id, kind))


async def throughput(request: web.Request) -> web.Response:
    """The rates of the topics this request's user may describe."""
    return _json(request.app[SAMPLER].as_json(await topic_names(kafka(request))))


async def index(request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC / "index.html")


# -- admin actions ---------------------------------------------------------------------


def _refusal(request: web.Request) -> web.Response | None:
    """Why a change is refused: admin actions off, or not a same-origin JSON request."""
    if not request.app[ADMIN]:
        return _json({"error": "FORBIDDEN", "message": "console.admin.enable is false"}, 403)
    origin = request.headers.get("Origin")
    if origin is not None and origin != f"{request.scheme}://{request.host}":
        return _json({"error": "FORBIDDEN", "message": f"cross-origin request from {origin}"}, 403)
    if request.method == "POST" and request.content_type != "application/json":
        return _json({"error": "INVALID_REQUEST", "message": "expected application/json"}, 415)
    return None


def _answer(outcome: Outcome) -> web.Response:
    return _json(outcome.as_json(), status=200 if outcome.error is None else 400)


async def topics_post(request: web.Request) -> web.Response:
    if (refused := _refusal(request)) is not None:
        return refused
    try:
        body = await request.json()
        name = str(body["name"])
        partitions = int(body.get("partitions", DEFAULT))
        replication = int(body.get("replication_factor", DEFAULT))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return _json({"error": "INVALID_REQUEST", "message": f"bad topic: {exc}"}, 400)
    return _answer(await create_topic(kafka(request), name, partitions, replication))


async def topic_delete(request: web.Request) -> web.Response:
    if (refused := _refusal(request)) is not None:
        return refused
    return _answer(await delete_topic(kafka(request), request.match_info["name"]))


async def group_delete(request: web.Request) -> web.Response:
    if (refused := _refusal(request)) is not None:
        return refused
    group_id = request.match_info["group_id"]
    return _answer(await delete_group(kafka(request), group_id))


# -- the application -------------------------------------------------------------------


async def topic_totals(kafka: KafkaCalls) -> TopicTotals:
    """Each topic's records written (its partitions' latest offsets) and bytes on disk."""
    return {
        t["name"]: (
            sum(p["end_offset"] or 0 for p in t["partitions"]),
            t["size"],
        )
        for t in await describe_topics(kafka)
    }


def console_application(
    kafka_as: KafkaCallsAs,
    sampler: ThroughputSampler,
    admin_enabled: bool,
    authentication: BasicAuthentication | None = None,
) -> web.Application:
    """The aiohttp application, with the bounds of every broker HTTP surface; behind
    ``authentication`` (every path, static files included) when there is one."""
    app = bounded_application()
    if authentication is not None:
        app.middlewares.append(authentication.middleware())
    app[KAFKA_CALLS_AS] = kafka_as
    app[SAMPLER] = sampler
    app[ADMIN] = admin_enabled
    app.router.add_get("/", index)
    app.router.add_get("/api/cluster", cluster)
    app.router.add_get("/api/topics", topics)
    app.router.add_post("/api/topics", topics_post)
    app.router.add_get("/api/topics/{name}", topic)
    app.router.add_delete("/api/topics/{name}", topic_delete)
    app.router.add_get("/api/groups", groups)
    app.router.add_get("/api/groups/{group_id}", group)
    app.router.add_delete("/api/groups/{group_id}", group_delete)
    app.router.add_get("/api/throughput", throughput)
    app.router.add_static("/static", STATIC)
    return app


@dataclass
class Console:
    """The running console: its listener and its sampler's task."""

    listener: HttpListener
    sampling: asyncio.Task

    async def close(self) -> None:
        self.sampling.cancel()
        await asyncio.gather(self.sampling, return_exceptions=True)
        await self.listener.close()


async def start_console(
    services: Services, settings: ConsoleSettings, latency: RequestLatency | None = None
) -> Console:
    """Serve the console at ``console.listeners`` and start sampling throughput."""
    kafka = InProcessKafka(services)
    every_topic = kafka.without_acls()
    sampler = ThroughputSampler(lambda: topic_totals(every_topic), latency)
    app = console_application(
        kafka.acting_as, sampler, settings.admin_enabled, settings.authentication
    )
    listener = await start_http_listener("console.listeners", app, settings.url, settings.tls)
    return Console(listener, asyncio.create_task(sampler.run(), name="console-throughput"))
