"""Idempotent producers: duplicates, sequence and epoch errors, snapshots, restarts."""

import struct

import pytest

from kpybroker.log.log_config import INT_MAX, LogConfig
from kpybroker.log.partition_log import wall_clock_ms
from kpybroker.log.producer_state import decode_snapshot
from kpybroker.protocol.errors import ErrorCode, KafkaError
from tests.helpers.log_builders import SMALL, Clock, batch, open_log

PID = 4000
# Producer entries expire a day after their last batch's timestamp, so use current ones.
NOW = wall_clock_ms()


def produce(log, seq, count=2, epoch=0, pid=PID, timestamp=NOW):
    return log.append(
        batch(count, producer_id=pid, producer_epoch=epoch, base_sequence=seq, timestamp=timestamp),
        0,
    )


def error_of(call) -> ErrorCode:
    with pytest.raises(KafkaError) as info:
        call()
    return info.value.code


def test_retries_of_the_last_five_batches_return_their_original_offsets(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    originals = [produce(log, seq) for seq in range(0, 12, 2)]  # six batches
    end, size = log.log_end_offset, log.size
    for original, seq in zip(originals[1:], range(2, 12, 2), strict=True):
        retry = produce(log, seq)
        assert retry.duplicate
        assert (retry.base_offset, retry.last_offset) == (
            original.base_offset,
            original.last_offset,
        )
    assert (log.log_end_offset, log.size) == (end, size)
    # The sixth-newest batch is no longer retained: its retry is out of order.
    assert error_of(lambda: produce(log, 0)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_a_sequence_gap_is_out_of_order(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    produce(log, 0)
    assert error_of(lambda: produce(log, 3)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce(log, 2).base_offset == 2


def test_a_duplicate_with_another_range_is_not_a_duplicate(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    produce(log, 0, count=2)
    assert error_of(lambda: produce(log, 0, count=3)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_epoch_bump_restarts_sequences_at_zero(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    produce(log, 0)
    produce(log, 2)
    assert error_of(lambda: produce(log, 4, epoch=1)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert not produce(log, 0, epoch=1).duplicate
    # The old epoch is fenced, even for what would have been its retry.
    assert error_of(lambda: produce(log, 2, epoch=0)) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert produce(log, 2, epoch=1).base_offset == 6


def test_an_unknown_producer_is_accepted_at_any_sequence(tmp_path) -> None:
    """Kafka >= 2.5 (KIP-360) never answers UNKNOWN_PRODUCER_ID for a missing producer."""
    log = open_log(tmp_path / "t-0")
    assert produce(log, 17, pid=99).base_offset == 0
    assert produce(log, 19, pid=99).base_offset == 2


def test_sequences_wrap_at_int32_max(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    produce(log, INT_MAX - 1, count=2)
    assert produce(log, 0, count=2).base_offset == 2
    assert produce(log, 0, count=2).duplicate


def test_producers_do_not_interfere(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    produce(log, 0, pid=1)
    produce(log, 0, pid=2)
    assert produce(log, 0, pid=1).duplicate
    assert produce(log, 2, pid=2).base_offset == 4


def test_duplicate_of_a_log_append_time_batch_reports_its_time(tmp_path) -> None:
    clock = Clock()
    log = open_log(
        tmp_path / "t-0", LogConfig(message_timestamp_type="LogAppendTime"), time_ms=clock
    )
    first = produce(log, 0)
    clock.advance(500)
    assert produce(log, 0).log_append_time == first.log_append_time == clock.now - 500


def test_state_survives_a_clean_restart(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    for seq in range(0, 40, 2):  # rolls several segments
        produce(log, seq)
    assert len(log.segments) > 1
    end = log.log_end_offset
    log.close()
    log = open_log(tmp_path / "t-0", clean_shutdown=True, recovery_point=end)
    retry = produce(log, 38)
    assert retry.duplicate and retry.base_offset == end - 2
    assert error_of(lambda: produce(log, 42)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce(log, 40).base_offset == end


def test_state_is_rebuilt_from_the_log_after_an_unclean_stop(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    for seq in range(0, 40, 2):
        produce(log, seq)
    log.release_descriptors()  # a crash: no close(), no snapshot at the log end
    log = open_log(tmp_path / "t-0")
    assert all(produce(log, seq).duplicate for seq in range(30, 40, 2))
    assert produce(log, 40).base_offset == 40


def test_snapshot_is_kafkas_version_1_format(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    produce(log, 0, count=3, timestamp=777)
    log.close()
    data = (tmp_path / "t-0" / f"{3:020d}.snapshot").read_bytes()
    version, _crc, count = struct.unpack_from(">hIi", data)
    assert (version, count, len(data)) == (1, 1, 10 + 46)
    assert struct.unpack_from(">qhiqiqiq", data, 10) == (PID, 0, 2, 2, 2, 777, -1, -1)
    assert [e.producer_id for e in decode_snapshot(data)] == [PID]


def test_a_corrupt_snapshot_is_dropped_and_state_replayed(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    produce(log, 0)
    produce(log, 2)
    log.close()
    snapshot = tmp_path / "t-0" / f"{4:020d}.snapshot"
    damaged = bytearray(snapshot.read_bytes())
    damaged[-1] ^= 0xFF
    snapshot.write_bytes(bytes(damaged))
    log = open_log(tmp_path / "t-0", clean_shutdown=True, recovery_point=4)
    assert not snapshot.exists()
    assert produce(log, 0).duplicate and produce(log, 2).duplicate


def test_idle_producers_expire(tmp_path) -> None:
    clock = Clock()
    log = open_log(tmp_path / "t-0", SMALL, time_ms=clock, producer_id_expiration_ms=1000)
    produce(log, 0, timestamp=clock.now)
    log.remove_expired_producers(clock.now + 999)
    assert produce(log, 0, timestamp=clock.now).duplicate
    log.remove_expired_producers(clock.now + 1000)
    assert not log.producer_state.producers
    assert produce(log, 50, timestamp=clock.now).base_offset == 2  # now unknown: any sequence
