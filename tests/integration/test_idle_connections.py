"""connections.max.idle.ms on a real broker: a connection that goes quiet is closed, one
that keeps talking is not, and a client that was cut off simply connects again."""

from __future__ import annotations

import threading

from kafka.protocol.metadata import ApiVersionsRequest

from tests.helpers.brokers import BrokerFactory
from tests.helpers.clients import ConfluentClient
from tests.helpers.wire import RawConnection

#: Long enough that a connection asking every 100 ms is never that quiet, even on a busy
#: machine; short enough for a quick test.
MAX_IDLE_MS = 3000


def test_quiet_connections_are_closed_and_busy_ones_kept(broker_factory: BrokerFactory) -> None:
    broker = broker_factory({"connections.max.idle.ms": MAX_IDLE_MS})
    stop = threading.Event()
    answered = []

    def keep_talking(connection: RawConnection) -> None:
        while not stop.wait(0.1):
            answered.append(connection.request(ApiVersionsRequest[0]()).error_code)

    with RawConnection(broker.bootstrap) as quiet, RawConnection(broker.bootstrap) as busy:
        assert quiet.request(ApiVersionsRequest[0]()).error_code == 0
        talker = threading.Thread(target=keep_talking, args=(busy,), daemon=True)
        talker.start()
        assert quiet.expect_closed(timeout=60) in ("EOF", "reset")
        stop.set()
        talker.join(30)
        assert answered and set(answered) == {0}
        assert busy.request(ApiVersionsRequest[0]()).error_code == 0  # still open

    # Clients reconnect as they would to Kafka.
    ConfluentClient().create_topic(broker.bootstrap, "after-idle", 1)
