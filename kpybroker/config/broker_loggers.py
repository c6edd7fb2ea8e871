"""This process's loggers as Kafka's BROKER_LOGGER config resource: their levels
described, and changed at run time (``kafka-configs.sh --entity-type broker-loggers``).

Kafka lists its log4j loggers: every logger its configuration names or its code has
created, and ``root``, each with its effective level. kpybroker lists Python's the same
way: every logger created so far (a module's logger exists once the module is imported)
and ``root``, with its effective level under log4j's name. As in Kafka (its
``RuntimeLoggerManager``), only a listed logger can be changed, to one of log4j's six
levels; DELETE clears a logger's own level so that it inherits its parent's, which
``root`` has none of. Changes last as long as the process: a restart goes back to the
command line's ``--log-level``, as a Kafka broker goes back to its log4j configuration.
"""

from __future__ import annotations

import logging

from kpybroker.protocol.errors import ErrorCode, KafkaError

ROOT = "root"

#: The levels Kafka accepts (``LogLevelConfig.VALID_LOG_LEVELS``, exactly these names), as
#: Python's. Python has no TRACE; below DEBUG, it logs what DEBUG logs.
SETTABLE_LEVELS = {
    "FATAL": logging.CRITICAL,
    "ERROR": logging.ERROR,
    "WARN": logging.WARNING,
    "INFO": logging.INFO,
    "DEBUG": logging.DEBUG,
    "TRACE": 5,
}

#: A Python level is described as the first of log4j's levels at or above it: 15 shows as
#: INFO, anything above CRITICAL as OFF, and 0 (root logging everything) as ALL.
_DESCRIBED = sorted((level, name) for name, level in SETTABLE_LEVELS.items())


def level_name(level: int) -> str:
    """``level`` (Python's) under log4j's name."""
    if level <= logging.NOTSET:
        return "ALL"
    for threshold, name in _DESCRIBED:
        if level <= threshold:
            return name
    return "OFF"


def _logger(name: str) -> logging.Logger | None:
    if name == ROOT:
        return logging.getLogger()
    found = logging.Logger.manager.loggerDict.get(name)
    return found if isinstance(found, logging.Logger) else None


def loggers() -> dict[str, str]:
    """Every logger of this process (``root`` included) and its effective level's name."""
    described = {
        name: level_name(found.getEffectiveLevel())
        for name, found in list(logging.Logger.manager.loggerDict.items())
        if isinstance(found, logging.Logger)
    }
    described[ROOT] = level_name(logging.getLogger().getEffectiveLevel())
    return described


def check_set(name: str, level: str) -> None:
    """INVALID_CONFIG unless ``name`` exists and ``level`` is one of log4j's levels."""
    _check_exists(name)
    if level not in SETTABLE_LEVELS:
        raise KafkaError(
            ErrorCode.INVALID_CONFIG,
            f"Cannot set the log level of {name} to {level} as it is not a supported log"
            f" level. Valid log levels are {', '.join(sorted(SETTABLE_LEVELS))}",
        )


def check_unset(name: str) -> None:
    """INVALID_CONFIG unless ``name`` exists; INVALID_REQUEST for ``root``."""
    _check_exists(name)
    if name == ROOT:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST, "Removing the log level of the root logger is not allowed"
        )


def _check_exists(name: str) -> None:
    if _logger(name) is None:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"Logger {name} does not exist!")


def set_level(name: str, level: str) -> None:
    """Give an existing logger (checked with ``check_set``) a level of its own."""
    found = _logger(name)
    assert found is not None, name
    found.setLevel(SETTABLE_LEVELS[level])


def unset_level(name: str) -> None:
    """Clear a logger's own level (checked with ``check_unset``): it inherits its parent's."""
    found = _logger(name)
    assert found is not None, name
    found.setLevel(logging.NOTSET)
