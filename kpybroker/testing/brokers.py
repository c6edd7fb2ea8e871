"""One broker for a test: on a free port, in a temporary directory, stopped and removed after."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from kpybroker.testing.clients import ClientHelpers, format_value
from kpybroker.testing.runners import Mode, Runner, runner_for

#: Settings that make tests quick, as Kafka's own test harnesses set them: a new
#: consumer group rebalances at once instead of waiting 3 s for more members.
TEST_DEFAULTS: Mapping[str, str] = {"group.initial.rebalance.delay.ms": "0"}


class KafkaBroker(ClientHelpers):
    """A kpybroker broker on 127.0.0.1 and a port of its own, for as long as a test needs it.

    ``overrides`` are server.properties settings on top of :data:`TEST_DEFAULTS`;
    without ``listeners`` it listens on ``PLAINTEXT://127.0.0.1:0`` (a free port).
    Its data goes to ``directory``, else to a temporary directory removed by
    :meth:`stop`. ``mode`` is ``"inprocess"`` (a thread of this process with its
    own event loop: quickest) or ``"subprocess"`` (``python -m kpybroker``).
    """

    def __init__(
        self,
        overrides: Mapping[str, object] | None = None,
        *,
        mode: Mode = "inprocess",
        directory: str | Path | None = None,
        start_timeout: float = 30.0,
        stop_timeout: float = 30.0,
    ) -> None:
        self.mode = mode
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self._own_directory = directory is None
        self.directory = Path(directory or tempfile.mkdtemp(prefix="kpybroker-"))
        self.settings: dict[str, str] = {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(self.directory / "data"),
            **TEST_DEFAULTS,
            **{key: format_value(value) for key, value in (overrides or {}).items()},
        }
        #: The advertised listeners, ``NAME://host:port``, once started.
        self.listeners: list[str] = []
        self._runner: Runner | None = None

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` of its first listener."""
        if not self.listeners:
            raise RuntimeError("the broker is not running")
        return self.listeners[0].partition("://")[2]

    def start(self) -> KafkaBroker:
        """Start it and wait until it serves (StartError, with why, if it does not)."""
        if self._runner is not None:
            raise RuntimeError("the broker is running already")
        runner = runner_for(self.mode, f"kpybroker-{self.settings.get('broker.id', 0)}")
        try:
            self.listeners = runner.start(self.settings, self.start_timeout)
        except BaseException:
            self._remove_own_directory()
            raise
        self._runner = runner
        return self

    def stop(self) -> None:
        """Stop it (RuntimeError if it does not stop cleanly) and remove its own directory."""
        runner, self._runner, self.listeners = self._runner, None, []
        try:
            if runner is not None:
                runner.stop(self.stop_timeout)
        finally:
            self._remove_own_directory()

    def _remove_own_directory(self) -> None:
        if self._own_directory:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __repr__(self) -> str:
        where = self.listeners[0] if self.listeners else "stopped"
        return f"<KafkaBroker {self.mode} {where} dir={self.directory}>"


@contextmanager
def broker(
    overrides: Mapping[str, object] | None = None,
    *,
    mode: Mode = "inprocess",
    directory: str | Path | None = None,
) -> Iterator[KafkaBroker]:
    """A started :class:`KafkaBroker`, stopped (and its temporary directory removed) on exit::

    with broker() as kafka:
        kafka.create_topic("events", partitions=3)
        produce_with_your_client(kafka.bootstrap_servers)
        assert len(kafka.wait_for_records("events", 10)) == 10
    """
    with KafkaBroker(overrides, mode=mode, directory=directory) as started:
        yield started
