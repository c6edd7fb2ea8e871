"""Real disk faults for tests: a small ext4 file system on a loop device, made to fail.

Every fault is the kernel's own, none is simulated in the broker:

- ``shut_down``: ``EXT4_IOC_SHUTDOWN`` (after syncing what was written): every later
  write, fsync and open fails with EIO, as on a disk that dropped off the bus.
- ``remount_read_only``: an ext4 error (``trigger_fs_error`` in sysfs) on a file
  system mounted ``errors=remount-ro``: the kernel makes it read-only in the
  middle of the appends, as it does on a real metadata error; writes fail with EROFS.
- ``fill``: a filler file takes the free space: the next write fails with ENOSPC.
- a thin device (``thin_mb``): the image lives on a tmpfs smaller than the file
  system, as on a thin-provisioned volume. Writes land in the page cache and
  succeed; the fsync that pushes them to the full backing store fails.

``repair`` brings the disk back (unmount, ``e2fsck``, mount again), as an operator
would before restarting the broker. The test is skipped, with the reason, where
loop devices cannot be mounted (not root, no loop device in a container).
"""

from __future__ import annotations

import fcntl
import os
import struct
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import pytest

#: ``_IOR('X', 125, __u32)``; flag 0 (EXT4_GOING_FLAGS_DEFAULT) syncs first.
EXT4_IOC_SHUTDOWN = 0x8004587D
FILLER = "filler"


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, check=False)


def _mount_or_skip(*argv: str) -> None:
    mounted = run("mount", *argv)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount here: {mounted.stderr.strip()}")


@dataclass
class LoopFilesystem:
    """An ext4 image mounted at ``mountpoint`` (``backing``: the tmpfs a thin one lives on)."""

    image: Path
    mountpoint: Path
    backing: Path | None

    @property
    def device(self) -> str:
        target = str(self.mountpoint)
        for line in Path("/proc/mounts").read_text().splitlines():
            fields = line.split()
            if fields[1] == target:
                return fields[0]
        raise AssertionError(f"{target} is not mounted")

    def shut_down(self) -> None:
        fd = os.open(self.mountpoint, os.O_RDONLY)
        try:
            fcntl.ioctl(fd, EXT4_IOC_SHUTDOWN, struct.pack("I", 0))
        finally:
            os.close(fd)

    def remount_read_only(self) -> None:
        """Sync, then raise an ext4 error: with ``errors=remount-ro`` the kernel makes the
        file system read-only."""
        os.sync()
        device = os.path.basename(self.device)
        Path(f"/sys/fs/ext4/{device}/trigger_fs_error").write_text("1")

    def fill(self) -> None:
        """Take every free block with a filler file (``free`` gives them back)."""
        chunk = b"\0" * (1 << 20)
        with open(self.mountpoint / FILLER, "wb", buffering=0) as f, suppress(OSError):
            while True:
                f.write(chunk)

    def free(self) -> None:
        (self.mountpoint / FILLER).unlink()

    def grow_backing(self, size_mb: int) -> None:
        """Give a thin device's backing store room again."""
        assert self.backing is not None
        grown = run("mount", "-o", f"remount,size={size_mb}m", str(self.backing))
        assert grown.returncode == 0, grown.stderr

    def repair(self) -> None:
        """Unmount, check and repair, mount again: the disk is back."""
        self.unmount()
        checked = run("e2fsck", "-fy", str(self.image))
        assert checked.returncode in (0, 1), checked.stdout + checked.stderr  # 1: fixed
        mounted = run("mount", "-o", "loop", str(self.image), str(self.mountpoint))
        assert mounted.returncode == 0, mounted.stderr

    def unmount(self) -> None:
        if run("umount", str(self.mountpoint)).returncode != 0:
            run("umount", "-l", str(self.mountpoint))


@contextmanager
def loop_filesystem(
    root: Path, name: str, size_mb: int = 64, *, options: str = "", thin_mb: int | None = None
) -> Iterator[LoopFilesystem]:
    """A fresh ext4 of ``size_mb`` mounted at ``root/name`` (``options``: mount options;
    ``thin_mb``: its image on a tmpfs of that size) for the duration."""
    if os.geteuid() != 0:
        pytest.skip("mounting a loop device needs root")
    mountpoint = root / name
    mountpoint.mkdir(parents=True)
    backing = None
    if thin_mb is not None:
        backing = root / f"{name}-backing"
        backing.mkdir()
        _mount_or_skip("-t", "tmpfs", "-o", f"size={thin_mb}m", "tmpfs", str(backing))
    image = (backing or root) / f"{name}.img"
    try:
        with open(image, "wb") as f:
            f.truncate(size_mb << 20)
        made = run("mkfs.ext4", "-q", "-F", str(image))
        assert made.returncode == 0, made.stderr
        _mount_or_skip("-o", ",".join(filter(None, ["loop", options])), str(image), str(mountpoint))
        filesystem = LoopFilesystem(image, mountpoint, backing)
        try:
            yield filesystem
        finally:
            filesystem.unmount()
    finally:
        if backing is not None:
            run("umount", "-l", str(backing))
