"""A log directory goes offline on its first disk error (``LogDirFailureChannel``, ``LogManager``).

The disk errors here are real ``OSError``s: a checkpoint file that is a directory
cannot be replaced. The kernel's own faults (EIO, ENOSPC, a read-only remount)
are in ``tests/integration/test_log_dir_failure.py``.
"""

import errno
import logging
from pathlib import Path

import pytest

from kpybroker.log.log_manager import LogManager
from kpybroker.log.names import RECOVERY_POINT_CHECKPOINT
from tests.helpers.log_builders import SMALL, fill

CLUSTER = "Qbc2dFl9TyCgSCW8Y9xsPQ"


def manager(*dirs: Path) -> LogManager:
    return LogManager(list(dirs), broker_id=1, cluster_id=CLUSTER, config_for=lambda _t: SMALL)


def break_checkpoint(log_dir: Path) -> None:
    """Make the recovery point checkpoint a directory: replacing it fails (EISDIR)."""
    (log_dir / RECOVERY_POINT_CHECKPOINT).mkdir()
    (log_dir / RECOVERY_POINT_CHECKPOINT / "x").touch()


def test_a_disk_error_takes_one_dir_offline_and_the_other_serves(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bad, good = tmp_path / "bad", tmp_path / "good"
    logs = manager(bad, good)
    in_bad = logs.get_or_create("t", 0, None)
    in_good = logs.get_or_create("t", 1, None)
    assert (logs.log_dir_of("t", 0), logs.log_dir_of("t", 1)) == (bad, good)
    fill(in_bad, 3)
    fill(in_good, 3)
    seen = []
    logs.failures.add_listener(lambda d: seen.append((d, logs.log_dir_of("t", 0))))
    break_checkpoint(bad)

    with caplog.at_level(logging.ERROR):
        logs.checkpoint_recovery_points()
        logs.checkpoint_recovery_points()  # reported once
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and f"in dir {bad}: [Errno 21]" in errors[0], errors
    assert seen == [(bad, bad)]  # listeners run before the logs are forgotten
    assert logs.online_dirs == [good]
    assert logs.get("t", 0) is None and logs.log_dir_of("t", 0) is None
    assert logs.get("t", 1) is in_good
    assert (good / RECOVERY_POINT_CHECKPOINT).read_text() == "0\n1\nt 1 0\n"  # still written
    assert logs.log_dir_of("t", 2) is None
    logs.get_or_create("t", 2, None)
    assert logs.log_dir_of("t", 2) == good  # new partitions go to the dirs online

    logs.close()
    assert (good / ".kafka_cleanshutdown").exists()
    assert not (bad / ".kafka_cleanshutdown").exists()  # recovered at the next start


def test_running_out_of_descriptors_is_not_the_disks_fault(tmp_path: Path) -> None:
    logs = manager(tmp_path)
    logs.failures.fail(tmp_path, "rolling t-0", OSError(errno.EMFILE, "Too many open files"))
    assert logs.online_dirs == [tmp_path]
    logs.close()


def error_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]


def test_a_dir_that_cannot_be_created_is_offline_from_the_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Kafka's ``createAndValidateLogDirs``: the broker starts on the other dirs."""
    good = tmp_path / "good"
    first = manager(good)
    first.get_or_create("t", 0, None)
    first.close()
    bad = tmp_path / "bad"
    bad.write_text("a file, not a directory")

    with caplog.at_level(logging.ERROR):
        logs = manager(bad, good)
    [error] = error_lines(caplog)
    assert error.startswith(f"Failed to create or validate data directory {bad}: [Errno 17]")
    assert error.endswith("; the directory goes offline")
    assert logs.failures.offline == {bad}
    assert logs.online_dirs == [good]
    assert logs.get("t", 0) is not None  # the good dir's logs are loaded
    logs.get_or_create("t", 1, None)
    assert logs.log_dir_of("t", 1) == good  # new partitions go to the dirs online
    logs.close()
    assert (good / ".kafka_cleanshutdown").exists()


def test_a_dir_whose_logs_cannot_be_loaded_goes_offline(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Kafka's ``loadLogs``: an I/O error while loading a dir takes it offline; none of
    its logs is served."""
    bad, good = tmp_path / "bad", tmp_path / "good"
    first = manager(bad, good)
    first.get_or_create("t", 0, None)
    first.get_or_create("t", 1, None)
    assert first.log_dir_of("t", 0) == bad
    first.close()
    # The clean shutdown marker cannot be taken: removing a directory with unlink fails.
    (bad / ".kafka_cleanshutdown").unlink()
    (bad / ".kafka_cleanshutdown").mkdir()

    with caplog.at_level(logging.ERROR):
        logs = manager(bad, good)
    [error] = error_lines(caplog)
    assert error.startswith(f"Error while loading log dir {bad}: [Errno 21]"), error
    assert logs.online_dirs == [good]
    assert logs.get("t", 0) is None and logs.log_dir_of("t", 0) is None
    assert logs.get("t", 1) is not None
    logs.close()
