"""A listener's kernel queue holds a burst of connections while the event loop is busy.

(Whether a burst is dropped shows only as a client's retry a second later, a timing that a
test must not assert: bench workload 10 measures it, 50 consumers joining at once.)"""

from __future__ import annotations

from kpybroker.server.listener import MIN_ACCEPT_QUEUE, accept_queue


def test_the_accept_queue_is_at_least_the_minimum() -> None:
    assert accept_queue(50) == MIN_ACCEPT_QUEUE
    assert accept_queue(MIN_ACCEPT_QUEUE + 1) == MIN_ACCEPT_QUEUE + 1
