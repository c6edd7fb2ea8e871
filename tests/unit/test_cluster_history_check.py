"""scripts/history_check.py finds each kind of anomaly, and only those."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers.history import history_check


def ack(value: str, partition: int, offset: int) -> dict:
    return {"op": "ack", "value": value, "partition": partition, "offset": offset}


def final(value: str, partition: int, offset: int) -> dict:
    return {"op": "final", "value": value, "partition": partition, "offset": offset}


def poll(consumer: str, value: str, partition: int, offset: int) -> dict:
    return {
        "op": "poll",
        "consumer": consumer,
        "value": value,
        "partition": partition,
        "offset": offset,
    }


def assign(consumer: str, *partitions: int) -> dict:
    return {"op": "assign", "consumer": consumer, "partitions": list(partitions)}


CLEAN = [
    ack("p0:0", 0, 0),
    ack("p1:0", 0, 1),
    ack("p0:1", 0, 2),
    {"op": "fail", "value": "p1:1", "error": "timed out"},
    assign("c0", 0),
    poll("c0", "p0:0", 0, 0),
    poll("c0", "p1:0", 0, 1),
    assign("c0", 0),  # a rebalance may rewind
    poll("c0", "p1:0", 0, 1),
    poll("c0", "p0:1", 0, 2),
    final("p0:0", 0, 0),
    final("p1:0", 0, 1),
    final("p0:1", 0, 2),
]


def counts(history: list[dict], **kwargs: bool) -> dict[str, int]:
    return dict(history_check.check(history, **kwargs).counts)


def test_a_clean_history_passes() -> None:
    report = history_check.check(CLEAN, require_consumed=True)
    assert report.ok, report.summary()
    assert dict(report.counts) == {"redelivered": 1}
    assert (report.acked, report.failed, report.final, report.polled) == (3, 1, 3, 4)


def test_lost_and_misplaced() -> None:
    history = [e for e in CLEAN if e != final("p0:1", 0, 2)] + [final("p0:1", 0, 3)]
    assert counts(history) == {
        "misplaced": 1,
        "redelivered": 1,
        "offset_gaps": 1,
        "phantom_reads": 1,
    }
    history = [e for e in CLEAN if e["op"] != "final" or e["value"] != "p0:1"]
    assert counts(history)["lost"] == 1


def test_duplicated_and_reordered() -> None:
    history = [*CLEAN, final("p0:0", 0, 3)]
    found = counts(history)
    assert found["duplicated"] == 1 and found["reordered"] == 1


def written_by(event: dict, producer_id: int, producer_epoch: int) -> dict:
    return {**event, "producer_id": producer_id, "producer_epoch": producer_epoch}


def test_a_record_written_again_in_a_new_producer_epoch_is_a_resend_not_a_duplicate() -> None:
    """librdkafka renumbers a record that may be written already when it bumps its epoch
    (librdkafka#4953): the second copy is acknowledged, the first one not; no broker can
    recognise it. The same copy under one epoch is the broker's duplicate."""
    first, copy = final("p0:1", 0, 2), final("p0:1", 0, 3)
    unacknowledged = [e for e in CLEAN if e not in (ack("p0:1", 0, 2), first)]
    history = [*unacknowledged, ack("p0:1", 0, 3), written_by(first, 7, 0), written_by(copy, 7, 1)]
    report = history_check.check(history)
    assert report.ok, report.summary()
    assert report.counts["resent_in_new_epoch"] == 1
    history = [*unacknowledged, ack("p0:1", 0, 3), written_by(first, 7, 1), written_by(copy, 7, 1)]
    assert counts(history)["duplicated"] == 1
    history = [*unacknowledged, ack("p0:1", 0, 3), written_by(first, 7, 0), copy]
    assert counts(history)["duplicated"] == 1
    third = written_by(final("p0:1", 0, 4), 7, 1)  # a duplicate of the re-send
    history = [*unacknowledged, ack("p0:1", 0, 3), written_by(first, 7, 0), written_by(copy, 7, 1)]
    found = counts([*history, third])
    assert found["resent_in_new_epoch"] == 1 and found["duplicated"] == 1


def test_an_acknowledgement_without_an_offset_is_checked_by_value() -> None:
    """librdkafka acknowledges records that a later batch proves written with offset -1001
    (an implicit ack): the record must be in the final log, or read, wherever it is."""
    implicit = [e for e in CLEAN if e != ack("p0:1", 0, 2)] + [ack("p0:1", 0, -1001)]
    report = history_check.check(implicit, require_consumed=True)
    assert report.ok, report.summary()
    assert report.counts["acked_without_offset"] == 1
    unread = [e for e in implicit if e != poll("c0", "p0:1", 0, 2)]
    assert counts(unread, require_consumed=True)["unconsumed"] == 1
    gone = [e for e in unread if e != final("p0:1", 0, 2)]
    assert counts(gone)["lost"] == 1


def test_offsets_going_backwards_and_phantom_reads() -> None:
    history = [*CLEAN, poll("c0", "p0:0", 0, 0)]  # no assignment in between
    assert counts(history)["offsets_backwards"] == 1
    history = [*CLEAN, poll("c1", "zombie:0", 0, 3)]
    assert counts(history)["phantom_reads"] == 1


def test_written_after_failure_and_unconsumed() -> None:
    history = [*CLEAN, final("p1:1", 0, 3)]
    report = history_check.check(history)
    assert report.ok and report.counts["written_after_failure"] == 1
    history = [*CLEAN, ack("p1:1", 0, 3), final("p1:1", 0, 3)]
    assert history_check.check(history).ok
    assert not history_check.check(history, require_consumed=True).ok


def test_command_line(tmp_path: Path, capsys) -> None:
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in CLEAN))
    assert history_check.main([str(path), "--require-consumed"]) == 0
    assert "OK" in capsys.readouterr().out
    path.write_text("".join(json.dumps(e) + "\n" for e in CLEAN if e["op"] != "final"))
    assert history_check.main([str(path)]) == 1
    assert "lost: 3" in capsys.readouterr().out


def test_records_below_the_log_start_offset_are_expired_not_lost() -> None:
    history = [
        ack("p0:0", 0, 0),
        ack("p0:1", 0, 1),
        ack("p0:2", 0, 2),
        assign("c0", 0),
        poll("c0", "p0:1", 0, 1),
        poll("c0", "p0:2", 0, 2),
        final("p0:2", 0, 2),
        {"op": "log_start", "partition": 0, "offset": 2},
    ]
    report = history_check.check(history, require_consumed=True)
    assert report.ok, report.summary()
    assert dict(report.counts) == {"expired": 2, "expired_unread": 1}  # p0:0 went unread
    assert report.acked == 3


def test_an_expired_record_read_with_another_value_is_misplaced() -> None:
    history = [
        ack("p0:0", 0, 0),
        ack("p0:1", 0, 1),
        assign("c0", 0),
        poll("c0", "p0:9", 0, 0),  # not what was acknowledged there
        poll("c0", "p0:1", 0, 1),
        final("p0:1", 0, 1),
        {"op": "log_start", "partition": 0, "offset": 1},
    ]
    assert counts(history)["misplaced"] == 1


def test_a_record_lost_above_the_log_start_offset_is_still_lost() -> None:
    history = [
        ack("p0:0", 0, 0),
        ack("p0:1", 0, 1),
        ack("p0:2", 0, 2),
        final("p0:2", 0, 2),
        {"op": "log_start", "partition": 0, "offset": 0},
    ]
    assert counts(history)["lost"] == 2
