"""Attributes that read as a ``Path`` and are stored as interned strings.

Why: a broker keeps paths for every partition and segment (the partition's directory,
each segment's files, the leader epoch checkpoint), and a ``pathlib.Path`` whose string
form has been used once (by any system call) holds that string, a list of its parts and
its name besides: about 320 bytes, against about 120 for the string alone. At tens of
thousands of partitions that is most of a kilobyte each. A ``Path`` is made on each read
instead, which costs a microsecond or two on paths that are not the append or read path.

The strings are interned (``sys.intern``; an interned string still goes when its last
holder does), so that equal paths are one string: a partition's directory is held by its
log, its producer state and each of its files. A file's path is kept as its directory and
its name (:class:`SplitPath`), so that it adds only its name, and the names of every
partition's first segment (``00000000000000000000.log``) are one string too.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Self, overload


class _PathAttribute:
    """A data descriptor for a class with ``__slots__``: ``obj.<name>`` reads as a ``Path``
    made from the strings the subclass keeps in the object's slots."""

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Self: ...

    @overload
    def __get__(self, obj: object, owner: type | None = None) -> Path: ...

    def __get__(self, obj: object | None, owner: type | None = None) -> Path | Self:
        if obj is None:
            return self
        return Path(self.text(obj))

    def text(self, obj: object) -> str:
        """The path as a ``str``, for ``os`` calls that need no ``Path``."""
        raise NotImplementedError


class StrPath(_PathAttribute):
    """``obj.<name>`` is a ``Path``, kept in the slot ``_<name>`` as an interned ``str``
    (which the class must declare). Assigning a ``Path`` or a ``str`` stores its string
    form."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = f"_{name}"

    def __set__(self, obj: Any, value: str | os.PathLike[str]) -> None:
        setattr(obj, self.slot, sys.intern(os.fspath(value)))

    def text(self, obj: object) -> str:
        return getattr(obj, self.slot)


class SplitPath(_PathAttribute):
    """Like :class:`StrPath`, for a file in a directory that other objects hold too: kept in
    the slots ``_<name>_directory`` and ``_<name>_name`` (which the class must declare) as
    two interned strings."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.directory_slot = f"_{name}_directory"
        self.name_slot = f"_{name}_name"

    def __set__(self, obj: Any, value: str | os.PathLike[str]) -> None:
        directory, name = os.path.split(os.fspath(value))
        setattr(obj, self.directory_slot, sys.intern(directory))
        setattr(obj, self.name_slot, sys.intern(name))

    def text(self, obj: object) -> str:
        return os.path.join(getattr(obj, self.directory_slot), getattr(obj, self.name_slot))
