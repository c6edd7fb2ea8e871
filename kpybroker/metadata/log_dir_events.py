"""Log dir event notifications: how a broker tells the controller a log directory failed.

Kafka 3.x in ZooKeeper mode (``LogDirEventNotificationZNode``): the broker
creates a persistent sequential znode
``/log_dir_event_notification/log_dir_event_<10 digits>`` holding
``{"version":1,"broker":<id>,"event":1}`` (event 1: a log directory failed).
The controller watches the children, reads the broker ids, deletes the nodes,
and finds out which of those brokers' replicas went offline.
"""

from __future__ import annotations

import json
import logging
from contextlib import suppress

from kpybroker.metadata.store import MetadataStore, NoNodeError, WatchCallback, join_path

log = logging.getLogger(__name__)

LOG_DIR_EVENT_NOTIFICATION_PATH = "/log_dir_event_notification"
SEQUENCE_PREFIX = "log_dir_event_"
LOG_DIR_FAILURE_EVENT = 1


def encode_log_dir_event(broker_id: int) -> bytes:
    return json.dumps(
        {"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT}, separators=(",", ":")
    ).encode()


def decode_log_dir_event(data: bytes) -> int:
    """The id of the broker whose log directory failed."""
    return int(json.loads(data)["broker"])


async def propagate_log_dir_event(store: MetadataStore, broker_id: int) -> None:
    """Tell the controller that a log directory of ``broker_id`` failed."""
    await store.create(
        join_path(LOG_DIR_EVENT_NOTIFICATION_PATH, SEQUENCE_PREFIX),
        encode_log_dir_event(broker_id),
        sequential=True,
        make_parents=True,
    )


async def pending_log_dir_events(store: MetadataStore, watch: WatchCallback) -> list[str]:
    """The notifications not handled yet; ``watch`` fires when the list changes."""
    return await store.get_children(LOG_DIR_EVENT_NOTIFICATION_PATH, watch)


async def take_log_dir_events(store: MetadataStore) -> list[int]:
    """The brokers whose log directories failed since the last call (the controller's
    ``LogDirEventNotification`` handler): each notification is read, then deleted."""
    brokers: list[int] = []
    for name in sorted(await store.get_children(LOG_DIR_EVENT_NOTIFICATION_PATH)):
        path = join_path(LOG_DIR_EVENT_NOTIFICATION_PATH, name)
        try:
            data, _ = await store.get(path)
            broker = decode_log_dir_event(data)
        except NoNodeError:
            continue  # taken by a previous controller meanwhile
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring malformed log dir event %s: %r", path, exc)
        else:
            if broker not in brokers:
                brokers.append(broker)
        with suppress(NoNodeError):
            await store.delete(path)
    return brokers
