"""Installing what the suites need, pinned, from the package registries, cached between runs.

Every installer either returns something usable or raises :class:`InstallError`
with the failing command's output: a suite that cannot install fails loudly,
it never passes by skipping. Installed trees are keyed by a hash of exactly
what was asked for (a requirements list, a lock file), so changing a pin makes
a fresh tree and an unchanged pin reuses the cached one without asking any
registry. Concurrent runs (several engineers share a machine) are serialised
with a lock file per tree.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from compat.paths import REPO_ROOT, compat_cache


class InstallError(RuntimeError):
    """A dependency could not be installed; the message says what failed and how."""


def run_checked(
    args: Sequence[str],
    what: str,
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 900.0,
) -> str:
    """Run an install command; return its stdout, or raise InstallError with its output."""
    try:
        proc = subprocess.run(
            list(args),
            cwd=cwd,
            env=dict(env) if env is not None else None,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InstallError(f"{what}: could not run {' '.join(args)}: {exc}") from exc
    if proc.returncode != 0:
        raise InstallError(
            f"{what}: `{' '.join(args)}` exited with status {proc.returncode}\n"
            f"--- stdout ---\n{proc.stdout[-4000:]}\n--- stderr ---\n{proc.stderr[-4000:]}"
        )
    return proc.stdout


def digest(*parts: str | bytes) -> str:
    """A short stable hash naming a cached tree after what it was built from."""
    sha = hashlib.sha256()
    for part in parts:
        sha.update(part.encode() if isinstance(part, str) else part)
        sha.update(b"\0")
    return sha.hexdigest()[:12]


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path.lock`` (one installer per tree at a time)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build_once(target: Path, build: Callable[[Path], None], *, in_place: bool = False) -> Path:
    """Build ``target`` with ``build(directory)`` unless a complete one is cached.

    A ``.complete`` stamp is written last, so an interrupted install leaves no
    half-built tree that a later run would trust. Trees are built in a
    temporary sibling and renamed into place, except with ``in_place`` (for
    virtualenvs, whose scripts hard-code their own path), where a partial
    tree is removed on failure instead.
    """
    stamp = target / ".complete"
    if stamp.exists():
        return target
    with locked(target):
        if stamp.exists():
            return target
        shutil.rmtree(target, ignore_errors=True)
        if in_place:
            workdir = target
            workdir.mkdir(parents=True)
        else:
            workdir = Path(tempfile.mkdtemp(prefix=target.name + ".tmp-", dir=target.parent))
        try:
            build(workdir)
            if workdir != target:
                workdir.rename(target)
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        stamp.touch()
    return target


# -- Debian packages --------------------------------------------------------------------


def ensure_commands(commands: Mapping[str, str]) -> None:
    """Make each command available, installing ``{command: debian_package}`` with apt-get.

    The machines run as root; without root, sudo is used when present.
    """
    missing = sorted({pkg for cmd, pkg in commands.items() if shutil.which(cmd) is None})
    if not missing:
        return
    prefix: list[str] = []
    if os.geteuid() != 0:
        if shutil.which("sudo") is None:
            raise InstallError(f"need root (or sudo) to apt-get install {' '.join(missing)}")
        prefix = ["sudo"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = [*prefix, "apt-get", "install", "-y", "-q", "--no-install-recommends", *missing]
    try:
        run_checked(install, "apt-get install", env=env)
    except InstallError:
        # Package lists that do not know the package yet, or a stale mirror.
        run_checked([*prefix, "apt-get", "update", "-q"], "apt-get update", env=env)
        run_checked(install, "apt-get install", env=env)
    still = [cmd for cmd in commands if shutil.which(cmd) is None]
    if still:
        raise InstallError(f"installed {' '.join(missing)} but still missing: {' '.join(still)}")


def debian_version(package: str) -> str:
    """The installed version of a Debian package (InstallError when not installed)."""
    out = run_checked(["dpkg-query", "-W", "-f=${Version}", package], f"dpkg-query {package}")
    return out.strip()


# -- Python ----------------------------------------------------------------------------


def python_env(name: str, requirements: Sequence[str]) -> Path:
    """A virtualenv with exactly ``requirements`` (pinned ``pkg==x.y``), cached; its python.

    Separate from the developer's environment so a suite's pins never clash
    with the project's own test dependencies.
    """
    key = digest(sys.version, *sorted(requirements))
    target = compat_cache() / "venvs" / f"{name}-{key}"

    def build(venv: Path) -> None:
        run_checked([sys.executable, "-m", "venv", "--clear", str(venv)], f"venv for {name}")
        (venv / "requirements.txt").write_text("\n".join(requirements) + "\n")
        run_checked(
            [str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
             "--disable-pip-version-check", "-r", str(venv / "requirements.txt")],
            f"pip install for {name}",
        )  # fmt: skip

    return build_once(target, build, in_place=True) / "bin" / "python"


def pypi_sdist(name: str, version: str, sha256: str) -> Path:
    """Download ``name==version``'s source distribution once and check its SHA-256."""
    target = compat_cache() / "downloads" / f"{name}-{version}"

    def build(tmp: Path) -> None:
        run_checked(
            [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
             "--no-deps", "--no-binary", ":all:", "-d", str(tmp), f"{name}=={version}"],
            f"pip download {name}=={version}",
        )  # fmt: skip
        [archive] = list(tmp.glob("*.tar.gz")) or [None]
        if archive is None:
            raise InstallError(f"pip download {name}=={version} delivered no .tar.gz sdist")
        got = hashlib.sha256(archive.read_bytes()).hexdigest()
        if got != sha256:
            raise InstallError(f"{archive.name}: sha256 {got}, expected the pinned {sha256}")

    [archive] = build_once(target, build).glob("*.tar.gz")
    return archive


# -- npm ---------------------------------------------------------------------------------


def npm_modules(name: str, package_dir: Path) -> Path:
    """``npm ci`` of ``package_dir``'s package.json and package-lock.json, cached; node_modules.

    The lock file pins every version (and its integrity hash); the tree is
    keyed by the lock file, so the registry is asked only when it changes.
    """
    ensure_commands({"node": "nodejs", "npm": "npm"})
    manifest = (package_dir / "package.json").read_bytes()
    lock = (package_dir / "package-lock.json").read_bytes()
    target = compat_cache() / "npm" / f"{name}-{digest(manifest, lock)}"

    def build(tmp: Path) -> None:
        (tmp / "package.json").write_bytes(manifest)
        (tmp / "package-lock.json").write_bytes(lock)
        run_checked(
            ["npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts"], f"npm ci {name}", cwd=tmp
        )

    return build_once(target, build) / "node_modules"


# -- Apache Kafka's jars ---------------------------------------------------------------


def kafka_jars() -> Path:
    """The lib directory of Apache Kafka's jars (``compat-tests/java/fetch-jars``, Maven)."""
    ensure_commands({"java": "openjdk-17-jre-headless", "mvn": "maven"})
    out = run_checked([str(REPO_ROOT / "compat-tests" / "java" / "fetch-jars")], "fetch-jars")
    lib = Path(out.strip().splitlines()[-1])
    if not any(lib.glob("kafka-clients-*.jar")):
        raise InstallError(f"fetch-jars returned {lib}, which holds no kafka-clients jar")
    return lib


def kafka_version() -> str:
    """The Kafka version pinned in ``compat-tests/java/pom.xml``."""
    pom = (REPO_ROOT / "compat-tests" / "java" / "pom.xml").read_text()
    start = pom.index("<kafka.version>") + len("<kafka.version>")
    return pom[start : pom.index("</kafka.version>", start)].strip()
