"""The config tables are the single source of every config's name, default and ``enforced`` flag.

- The settings classes of replication and the coordinator take their keys and defaults from the
  broker table (``broker_setting``); here they are checked like the log layer's, below.
- The log layer sits below ``kpybroker.config`` and must not import it, so its settings classes
  (``LogConfig``, ``LogManagerConfig``, ``CleanerConfig``) name their configs in field metadata
  and repeat the defaults; here every key and default is compared with the tables.
- ``enforced`` (the docs' "Enforced" column) must be true: every config marked enforced is read
  by code under ``kpybroker/``, and every config that code reads is marked enforced. A group
  config counts as read only outside ``kpybroker/config/``, where its table, validation and
  description live: the coordinator is what acts on one.
"""

from __future__ import annotations

import ast
import dataclasses
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

import kpybroker
from kpybroker.cluster.replication_settings import ReplicationSettings
from kpybroker.config import (
    BROKER_CONFIGS,
    GROUP_CONFIGS,
    TOPIC_CONFIGS,
    BrokerConfig,
    topic_defaults,
)
from kpybroker.config.core import ConfigKey
from kpybroker.config.setting_fields import CONVERT
from kpybroker.coordinator.coordinator_settings import CoordinatorSettings
from kpybroker.log.log_config import (
    CONFIG_KEY,
    TOPIC_CONFIG_FIELDS,
    CleanerConfig,
    LogConfig,
    LogManagerConfig,
    config_fields,
)

PACKAGE = Path(kpybroker.__file__).resolve().parent
TABLES = {
    PACKAGE / "config" / "broker_table.py",
    PACKAGE / "config" / "topic_table.py",
    PACKAGE / "config" / "group_table.py",
}

#: Every class whose fields hold configs, with the table its keys belong to.
SETTINGS: dict[type, dict[str, ConfigKey]] = {
    LogConfig: TOPIC_CONFIGS,
    LogManagerConfig: BROKER_CONFIGS,
    CleanerConfig: BROKER_CONFIGS,
    ReplicationSettings: BROKER_CONFIGS,
    CoordinatorSettings: BROKER_CONFIGS,
}
#: Fields of those classes that hold no config, and why.
NOT_CONFIGS = {
    (LogManagerConfig, "cleaner"),  # the CleanerConfig, itself a settings class
    (CoordinatorSettings, "new_member_join_timeout_ms"),  # Kafka's internal constant
}
#: Configs that code names without acting on them, and why.
NAMED_NOT_READ = {
    # config/broker.py names them to type per-listener, per-mechanism overrides
    # (listener.name.NAME.MECHANISM.sasl.jaas.config) for DescribeConfigs.
    "sasl.login.class",
    "sasl.login.callback.handler.class",
}


def typed(value: object) -> tuple[type, object]:
    """A value with its type, so that 1 and True, or 1 and 1.0, do not compare equal."""
    return type(value), value


# --------------------------------------------------------------------------- layering


def imported_modules(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: relative import"
            yield node.module or ""


def test_the_log_layer_imports_only_itself_and_the_protocol() -> None:
    for path in sorted((PACKAGE / "log").rglob("*.py")):
        for module in imported_modules(path):
            if module == "kpybroker" or module.startswith("kpybroker."):
                assert module.startswith(("kpybroker.log", "kpybroker.protocol")), (path, module)


# --------------------------------------------------------------------------- keys and defaults


@pytest.mark.parametrize("cls", list(SETTINGS), ids=lambda cls: cls.__name__)
def test_settings_fields_are_configs_with_the_tables_defaults(cls: type) -> None:
    table = SETTINGS[cls]
    instance = cls()
    for f in dataclasses.fields(cls):
        if (cls, f.name) in NOT_CONFIGS:
            assert CONFIG_KEY not in f.metadata
            continue
        assert CONFIG_KEY in f.metadata, f"{cls.__name__}.{f.name} names no config"
        name = f.metadata[CONFIG_KEY]
        assert name in table, f"{cls.__name__}.{f.name}: {name} is not in the table"
        expected = table[name].default
        convert = f.metadata.get(CONVERT)
        if convert is not None:  # broker_setting's conversion (minutes to ms, ...)
            expected = convert(expected)
        actual = getattr(instance, f.name)
        assert typed(actual) == typed(expected), (cls.__name__, f.name, name)
    assert len(set(config_fields(cls))) == len(config_fields(cls))


def test_log_config_of_a_default_broker_is_the_default_log_config() -> None:
    derived = LogConfig.from_topic_config(topic_defaults(BrokerConfig()))
    assert derived == LogConfig()
    assert config_fields(LogConfig) == TOPIC_CONFIG_FIELDS
    assert TOPIC_CONFIG_FIELDS["flush.messages"] == "flush_interval_messages"


def test_broker_settings_of_a_default_broker_are_their_defaults() -> None:
    broker = BrokerConfig()
    assert LogManagerConfig.from_broker_config(broker.get) == LogManagerConfig()
    assert ReplicationSettings.from_config(broker) == ReplicationSettings()
    assert CoordinatorSettings.from_config(broker) == CoordinatorSettings()


def test_broker_settings_read_every_field_from_the_config() -> None:
    broker = BrokerConfig(
        {
            "num.replica.fetchers": "0",
            "replica.fetch.max.bytes": "7",
            "offsets.retention.minutes": "3",
            "offsets.load.buffer.size": "4096",
            "log.cleaner.backoff.ms": "5",
            "log.retention.check.interval.ms": "6",
        }
    )
    replication = ReplicationSettings.from_config(broker)
    assert (replication.num_fetchers, replication.fetch_max_bytes) == (1, 7)
    coordinator = CoordinatorSettings.from_config(broker)
    assert coordinator.offsets_retention_ms == 3 * 60_000
    assert coordinator.offsets_load_buffer_bytes == 4096
    log_manager = LogManagerConfig.from_broker_config(broker.get)
    assert (log_manager.cleaner.backoff_ms, log_manager.retention_check_interval_ms) == (5, 6)


# --------------------------------------------------------------------------- enforced


class Module:
    """What one module of kpybroker/ mentions: string constants and attribute names."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tree = ast.parse(path.read_text(encoding="utf-8"))
        dict_keys = {
            id(key)
            for node in ast.walk(self.tree)
            if isinstance(node, ast.Dict)
            for key in node.keys
            if key is not None
        }
        # A config name as a dict literal's key is a config being written (the offsets
        # topic's overrides, say), not read.
        self.strings = {
            node.value
            for node in ast.walk(self.tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            if id(node) not in dict_keys
        }
        self.attributes = {
            node.attr for node in ast.walk(self.tree) if isinstance(node, ast.Attribute)
        }


@cache
def modules() -> dict[Path, Module]:
    return {path: Module(path) for path in sorted(PACKAGE.rglob("*.py")) if path not in TABLES}


def defining_module(cls: type) -> Path:
    return Path(sys.modules[cls.__module__].__file__ or "").resolve()


def shown(path: Path) -> str:
    return str(path.relative_to(PACKAGE.parent))


def readers_of(cls: type, field_name: str) -> set[Path]:
    """Modules (other than the one defining ``cls``) that read the field, directly or
    through a property or method of ``cls`` that reads ``self.<field>``."""
    home = defining_module(cls)
    names = {field_name}
    class_def = next(
        node
        for node in ast.walk(modules()[home].tree)
        if isinstance(node, ast.ClassDef) and node.name == cls.__name__
    )
    for item in class_def.body:
        if isinstance(item, ast.FunctionDef):
            reads = {
                node.attr
                for node in ast.walk(item)
                if isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
            }
            if field_name in reads:
                names.add(item.name)
    return {path for path, m in modules().items() if path != home and names & m.attributes}


@cache
def config_readers() -> dict[str, set[str]]:
    """Config name -> how code reads it (for failure messages), over every table; group
    configs under ``group:<name>``, since their names may be a broker config's too."""
    readers: dict[str, set[str]] = {}
    homes = {defining_module(cls) for cls in SETTINGS}
    # 1. A settings field holding the config, read outside the module defining it.
    for cls in SETTINGS:
        for name, field_name in config_fields(cls).items():
            for path in readers_of(cls, field_name):
                readers.setdefault(name, set()).add(f"{cls.__name__}.{field_name} in {shown(path)}")
    # 2. The name itself, outside the tables and the settings classes' declarations.
    for path, module in modules().items():
        if path in homes:
            continue
        for name in module.strings & (BROKER_CONFIGS.keys() | TOPIC_CONFIGS.keys()):
            readers.setdefault(name, set()).add(shown(path))
        if PACKAGE / "config" not in path.parents:
            for name in module.strings & GROUP_CONFIGS.keys():
                readers.setdefault(f"group:{name}", set()).add(shown(path))
    # 3. A broker synonym of a topic or group config that is read supplies its default.
    for name, key in TOPIC_CONFIGS.items():
        if name in readers:
            for synonym in key.synonyms:
                readers.setdefault(synonym, set()).add(f"the topic default of {name}")
    for name, key in GROUP_CONFIGS.items():
        if f"group:{name}" in readers:
            for synonym in key.synonyms:
                readers.setdefault(synonym, set()).add(f"the group default of {name}")
    return readers


def reader_key(kind: str, key: ConfigKey) -> str:
    return f"group:{key.name}" if kind == "group" else key.name


def all_keys() -> Iterator[tuple[str, ConfigKey]]:
    yield from (("topic", key) for key in TOPIC_CONFIGS.values())
    yield from (("broker", key) for key in BROKER_CONFIGS.values())
    yield from (("group", key) for key in GROUP_CONFIGS.values())


def test_every_config_marked_enforced_is_read_by_code() -> None:
    readers = config_readers()
    unread = [
        f"{kind} {key.name}"
        for kind, key in all_keys()
        if key.enforced and reader_key(kind, key) not in readers
    ]
    assert unread == [], (
        "marked enforced, but no code under kpybroker/ reads them (mark them enforced=False "
        "in the table, then run `python scripts/gen_docs.py`): " + ", ".join(unread)
    )


def test_every_config_read_by_code_is_marked_enforced() -> None:
    readers = config_readers()
    unmarked = {
        f"{kind} {key.name}: {sorted(readers[reader_key(kind, key)])}"
        for kind, key in all_keys()
        if not key.enforced and reader_key(kind, key) in readers and key.name not in NAMED_NOT_READ
    }
    assert unmarked == set(), (
        "read by code but marked not enforced (mark them enforced=True in the table, then "
        "run `python scripts/gen_docs.py`): " + "; ".join(sorted(unmarked))
    )
    for name in NAMED_NOT_READ:
        assert name in BROKER_CONFIGS and not BROKER_CONFIGS[name].enforced
