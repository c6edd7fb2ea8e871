"""``StrPath``: an attribute that reads as a ``Path`` and is stored as a ``str``.

Why: a broker keeps paths for every partition and segment (the partition's directory,
each segment's files, the leader epoch checkpoint), and a ``pathlib.Path`` whose string
form has been used once (by any system call) holds that string, a list of its parts and
its name besides: about 320 bytes, against about 120 for the string alone. At tens of
thousands of partitions that is most of a kilobyte each. A ``Path`` is made on each read
instead, which costs a microsecond or two on paths that are not the append or read path.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, overload


class StrPath:
    """A data descriptor for a class with ``__slots__``: ``obj.<name>`` is a ``Path``, kept in
    the slot ``_<name>`` as a ``str`` (which the class must declare). Assigning a ``Path`` or
    a ``str`` stores its string form."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = f"_{name}"

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> StrPath: ...

    @overload
    def __get__(self, obj: object, owner: type | None = None) -> Path: ...

    def __get__(self, obj: object | None, owner: type | None = None) -> Path | StrPath:
        if obj is None:
            return self
        return Path(getattr(obj, self.slot))

    def __set__(self, obj: Any, value: str | os.PathLike[str]) -> None:
        setattr(obj, self.slot, os.fspath(value))
