"""Settings classes whose fields are broker configs, named and defaulted by the broker table.

Replication and the coordinator gather the broker configs they read into a frozen dataclass.
Each such field is declared with ``broker_setting(name)``: its default is the table's default
(a name the table lacks fails at import) and ``settings_from_config`` reads it from a
``BrokerConfig``, so neither a key nor a default is written twice. The log layer, which sits
below ``kpybroker.config`` and cannot read the table, names its configs the same way
(``kpybroker.log.log_config.config_fields``) and a unit test compares its defaults with the tables.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field, fields
from typing import Any, TypeVar

from kpybroker.config.broker_config import BrokerConfig
from kpybroker.config.broker_table import BROKER_CONFIGS
from kpybroker.log.log_config import CONFIG_KEY

T = TypeVar("T")

#: The metadata entry holding the function that turns a config's value into the field's.
CONVERT = "convert"


def broker_setting(name: str, convert: Callable[[Any], Any] | None = None) -> Any:
    """A dataclass field holding broker config ``name``, defaulting to the table's default.

    ``convert`` maps the config's value to the field's (minutes to ms, say); it applies to
    the default and to every value read.
    """
    default = BROKER_CONFIGS[name].default
    if convert is not None:
        default = convert(default)
    return field(default=default, metadata={CONFIG_KEY: name, CONVERT: convert})


def settings_from_config(cls: Callable[..., T], config: BrokerConfig) -> T:
    """An instance of settings class ``cls`` with every ``broker_setting`` field read from
    ``config``; other fields keep their defaults."""
    values: dict[str, Any] = {}
    for f in fields(cls):  # type: ignore[arg-type]
        name = f.metadata.get(CONFIG_KEY)
        if name is None:
            continue
        value = config.get(name)
        convert = f.metadata[CONVERT]
        values[f.name] = value if convert is None else convert(value)
    return cls(**values)
