"""Supplied by kpybroker's compat-tests in place of the module the sdist leaves out.

``test/integration/fixtures.py`` imports ``ExternalService`` and
``SpawnedService`` from here. With ``KAFKA_URI`` set, the fixtures only wrap
the broker that compat-tests/run started in an ``ExternalService``; nothing is
ever spawned, so ``SpawnedService`` refuses loudly instead of pretending.
"""


class ExternalService:
    """A service someone else started: only its address."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port

    def open(self) -> None:
        pass

    def close(self) -> None:
        pass

    def dump_logs(self) -> None:
        pass

    def wait_for(self, pattern: str, timeout: float = 30) -> bool:
        return True


class SpawnedService:
    """Not available here: compat-tests/run starts the broker (set KAFKA_URI)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise RuntimeError(
            "compat-tests supplies an external broker only: set KAFKA_URI=tcp://HOST:PORT"
        )
