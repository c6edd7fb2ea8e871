"""A bounded, process-wide cache of the log's open files (segments' ``.log`` files and the
write handles of their indexes), sized from ``RLIMIT_NOFILE``.

Why: a descriptor per segment file does not scale. 100,000 partitions with a few
segments each want several hundred thousand descriptors, the usual limit is in the
tens of thousands, and the same limit is shared with client sockets and every short-lived
file (checkpoints, snapshots): a broker that runs out fails in all of them at once.
Here files are opened on use and kept open in least-recently-used order, at most
:func:`capacity_for_limit` of them (half the soft limit: the other half stays free for
sockets and short-lived files). The active segment of a busy partition is used on every
append, so it stays open; an idle partition's files are the ones closed. Should sockets
need more than their half (10,000 idle connections under a limit of 20,000), an accept
that fails with EMFILE makes the cache give way (:meth:`OpenFiles.give_way`): a log file
can be reopened when it is next used, a connection not accepted cannot.

The limit is per process, so the cache is too (:data:`OPEN_FILES`), shared by every log.

Lifetime: an :class:`OpenFile` closes its descriptor when the last reference to it goes
(CPython frees an object at that moment). The cache holds one reference; a read's
``FileSlice`` holds another until its response is written, so eviction never closes a
descriptor a pending ``sendfile`` names, nor lets the kernel give its number to another
file. Code that makes several calls on one descriptor keeps the ``OpenFile`` in a local.
Descriptors held only by reads count against the capacity (the cache keeps fewer open
while there are some), and once they fill it, :attr:`OpenFiles.has_room` tells reads to
copy their bytes instead (a fetch of thousands of partitions): the descriptors open stay
within the capacity, plus the one a copying read opens when reads hold all the others.

Durability: ``fsync`` is per file, not per descriptor (all of the file's data, POSIX
says), so an evicted descriptor is closed without one: the next flush fsyncs the file
through a fresh descriptor and covers what the old one wrote, and Linux reports a
write-back error that no descriptor has seen to that fsync too.

The log cleaner's worker thread reads segments while the event loop appends, hence the lock.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import resource
import threading
import weakref
from collections import OrderedDict
from pathlib import Path

from kpybroker.log.str_paths import SplitPath

log = logging.getLogger(__name__)

#: The fewest files the cache keeps open, whatever the limit.
MIN_CAPACITY = 16
#: The cache's capacity when the soft limit is unlimited.
UNLIMITED_CAPACITY = 1 << 20
#: Descriptors the cache lets go at a time when a client connection needs one.
GIVE_WAY = 16
#: The process is out of file descriptors: not the disk's fault.
OUT_OF_DESCRIPTORS = (errno.EMFILE, errno.ENFILE)


def capacity_for_limit(soft_limit: int) -> int:
    """How many log files stay open under a soft ``RLIMIT_NOFILE`` of ``soft_limit``: half
    of it, leaving the rest for client sockets and short-lived files."""
    if soft_limit == resource.RLIM_INFINITY:
        return UNLIMITED_CAPACITY
    return max(MIN_CAPACITY, soft_limit // 2)


def raise_open_files_limit() -> None:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit, as far as the kernel allows, and log
    both: a start-up step of the entry point, so that no operator has to remember
    ``ulimit -n`` when the hard limit is generous (systemd's default soft limit is 1024)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    raised = soft
    if hard != soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            raised = hard
        except (ValueError, OSError) as exc:  # an unlimited hard limit above fs.nr_open
            log.warning("could not raise the open files limit to %s: %s", hard, exc)
    log.info(
        "open files limit (RLIMIT_NOFILE): soft %s (was %s), hard %s; "
        "up to %d log files kept open (half the soft limit)",
        _show(raised),
        _show(soft),
        _show(hard),
        capacity_for_limit(raised),
    )


def _show(limit: int) -> str:
    return "unlimited" if limit == resource.RLIM_INFINITY else str(limit)


class OpenFile:
    """One open descriptor, closed when the last reference to this object goes."""

    __slots__ = ("__weakref__", "fd", "source")

    def __init__(self, fd: int, source: CachedFile) -> None:
        self.fd = fd
        #: The file this descriptor was opened for (tells a read's segment apart).
        self.source = source

    def __del__(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)

    def pread(self, size: int, position: int) -> bytes:
        return os.pread(self.fd, size, position)

    def pread_into(self, buffer: memoryview, position: int) -> memoryview:
        """Fill ``buffer`` from ``position``; the part filled (shorter at the end of the file)."""
        return buffer[: os.preadv(self.fd, [buffer], position)]

    def write(self, data: bytes | bytearray | memoryview) -> int:
        return os.write(self.fd, data)

    def truncate(self, size: int) -> None:
        os.ftruncate(self.fd, size)


class CachedFile:
    """A file the cache opens on use: its path (renames update it) and how to open it.

    Three per segment: the path is a ``SplitPath``.
    """

    __slots__ = ("_cache", "_path_directory", "_path_name", "flags")

    path = SplitPath()

    def __init__(self, cache: OpenFiles, path: Path, flags: int) -> None:
        self.path = path
        self.flags = flags
        self._cache = cache

    def __repr__(self) -> str:
        return f"CachedFile({self.filename})"

    @property
    def filename(self) -> str:
        """The path as a ``str``, for ``os`` calls that need no ``Path``."""
        return CachedFile.path.text(self)

    def open(self, *, create: bool = False) -> OpenFile:
        """The file's descriptor, opened now if it is not cached; ``create`` makes a new file
        (``FileExistsError`` if there is one)."""
        return self._cache.acquire(self, os.O_CREAT | os.O_EXCL if create else 0)

    @property
    def is_open(self) -> bool:
        return self._cache.holds(self)

    @property
    def has_room(self) -> bool:
        """Whether a read of this file may hold its descriptor (``OpenFiles.has_room``)."""
        return self._cache.has_room

    def close(self) -> None:
        """Let the descriptor go (it closes once no read in flight holds it)."""
        self._cache.forget(self)

    def sync(self, *, data_only: bool = False) -> None:
        """fsync (or fdatasync) the file: through the cached descriptor when there is one, else
        through a short-lived one, which does not push another file out of the cache."""
        sync = os.fdatasync if data_only else os.fsync
        opened = self._cache.cached(self)
        if opened is not None:
            sync(opened.fd)
            return
        fd = os.open(self.filename, os.O_RDONLY)
        try:
            sync(fd)
        finally:
            os.close(fd)

    def rename(self, path: Path) -> None:
        """Move the file; a cached descriptor stays valid."""
        os.replace(self.filename, path)
        self.path = path


class OpenFiles:
    """The least recently used files are closed to keep at most ``capacity`` open."""

    def __init__(self, capacity: int | None = None) -> None:
        """``capacity`` None: :func:`capacity_for_limit` of the soft limit at first use, which
        is after the entry point raised it."""
        self._capacity = capacity
        self._open: OrderedDict[CachedFile, OpenFile] = OrderedDict()
        #: Evicted descriptors that reads still hold (they leave the set as they close).
        self._held: weakref.WeakSet[OpenFile] = weakref.WeakSet()
        self._lock = threading.Lock()
        #: Whether ``give_way`` has lowered the capacity (it says so once).
        self._gave_way = False

    @property
    def capacity(self) -> int:
        if self._capacity is None:
            self._capacity = capacity_for_limit(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        return self._capacity

    def __len__(self) -> int:
        """Descriptors open: those cached and those only reads hold."""
        return len(self._open) + len(self._held)

    @property
    def has_room(self) -> bool:
        """Whether a read may hold a descriptor until its response is written (else it copies)."""
        return len(self) <= self.capacity

    def file(self, path: Path, flags: int) -> CachedFile:
        """A file opened with ``flags`` on use (not now)."""
        return CachedFile(self, path, flags)

    def acquire(self, file: CachedFile, extra_flags: int = 0) -> OpenFile:
        """``file``'s descriptor, the most recently used from now on.

        A hit takes no lock (each dict operation is atomic): the fast path of every append
        and read. Should the cleaner's thread evict the file in between, the descriptor
        returned stays valid all the same, since the caller holds it.
        """
        opened = self._open.get(file)
        if opened is not None:
            try:  # noqa: SIM105 - contextlib.suppress costs about 1 us, on every append
                self._open.move_to_end(file)
            except KeyError:  # evicted by the other thread just now
                pass
            return opened
        with self._lock:
            opened = self._open.get(file)
            if opened is not None:
                return opened
            capacity = self.capacity
            while self._open and len(self) >= capacity:
                self._evict_oldest()
            opened = OpenFile(self._os_open(file.filename, file.flags | extra_flags), file)
            self._open[file] = opened
            return opened

    def _os_open(self, path: str, flags: int) -> int:
        """``os.open``; when the process is out of descriptors (sockets took the headroom),
        the least recently used files are closed until it succeeds or none is left."""
        while True:
            try:
                return os.open(path, flags, 0o644)
            except OSError as exc:
                if exc.errno not in OUT_OF_DESCRIPTORS or not self._open:
                    raise
                self._evict_oldest()

    def _evict_oldest(self) -> None:
        """Drop the least recently used descriptor: closed now, or when the reads holding it
        are done."""
        self._held.add(self._open.popitem(last=False)[1])

    def give_way(self, count: int = GIVE_WAY) -> bool:
        """Close up to ``count`` cached descriptors and lower the capacity by as many, for a
        descriptor that cannot be reopened later: a client's socket, whose accept failed
        with EMFILE. The log's files are reopened on use, so under the limit the cache
        shrinks rather than connections waiting. True if any descriptor was let go."""
        with self._lock:
            freed = 0
            while freed < count and self._open and self.capacity > MIN_CAPACITY:
                self._evict_oldest()
                self._capacity = self.capacity - 1
                freed += 1
        if freed and not self._gave_way:
            self._gave_way = True
            log.warning(
                "The process's limit on open files (RLIMIT_NOFILE) is reached: the cache of "
                "open log files gives way to client connections (capacity now %d); logged "
                "once",
                self.capacity,
            )
        return freed > 0

    def cached(self, file: CachedFile) -> OpenFile | None:
        """The cached descriptor of ``file``, if any, without touching the order."""
        with self._lock:
            return self._open.get(file)

    def holds(self, file: CachedFile) -> bool:
        return file in self._open

    def forget(self, file: CachedFile) -> None:
        with self._lock:
            self._open.pop(file, None)


#: The process's cache: every log's segment and index files go through it.
OPEN_FILES = OpenFiles()
