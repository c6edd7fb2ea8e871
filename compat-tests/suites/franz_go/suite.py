"""franz-go (kgo and kadm), pinned by go.mod and go.sum, run as ``go test`` tests.

The tests are built once per content of this folder's Go files (and Go
version) into ``~/.cache/kpybroker/compat/go/``, with the module and build
caches beside them, so a second run downloads and compiles nothing. The
binary runs under ``test2json`` (built from the Go toolchain's own source),
whose JSON events ``compat.gotest`` turns into JUnit XML.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

from compat.install import InstallError, build_once, digest, run_checked
from compat.paths import COMPAT_ROOT, compat_cache
from compat.suite import Command, RunContext, Suite

#: The group of the test ids (``franz_go::TestAdminTopics``).
GROUP = "franz_go"
#: Where Go is when it is not on PATH (the machines install it there).
GO_FALLBACK = Path("/usr/local/go/bin/go")


def _go() -> str:
    go = shutil.which("go") or (str(GO_FALLBACK) if GO_FALLBACK.exists() else None)
    if go is None:
        raise InstallError(f"the franz-go suite needs Go: no `go` on PATH nor at {GO_FALLBACK}")
    return go


def go_env(go_cache: Path) -> dict[str, str]:
    """The environment of every go command: caches under ours, no other module setup applies."""
    env = dict(os.environ)
    env.update(
        GOMODCACHE=str(go_cache / "mod"),
        GOCACHE=str(go_cache / "build"),
        GOPATH=str(go_cache / "gopath"),
        # Resolve from go.mod and go.sum alone; the build runs in a copy, so
        # -mod=mod never rewrites the checked-in files.
        GOFLAGS="-mod=mod -buildvcs=false",
        GOWORK="off",
        GOTOOLCHAIN="local",  # never download another toolchain
        CGO_ENABLED="0",  # no C compiler needed
        GOTELEMETRY="off",
    )
    return env


def _pins(go_mod: str) -> dict[str, str]:
    """``{module: version}`` of go.mod's direct requirements."""
    pins = {}
    for module, version, comment in re.findall(
        r"^\s*(github\.com/\S+)\s+v(\S+)(\s*//\s*indirect)?", go_mod, re.MULTILINE
    ):
        if not comment:
            pins[module] = version
    return pins


class FranzGoSuite(Suite):
    name = "franz-go"
    title = "franz-go"
    summary = (
        "kadm admin; produce with each codec; idempotent producer and a consumer group with "
        "commits; transactions, consume-transform-produce, fencing"
    )
    what = (
        "kadm create/list/describe/delete topics; sync produce to three partitions with each "
        "codec, read back exactly (batches still compressed); franz-go's default idempotent "
        "producer and a kgo.ConsumerGroup member committing, a second member resuming from the "
        "commits; a transactional producer committing, aborting and leaving a transaction open "
        "under read_committed and read_uncommitted consumers; a GroupTransactSession copy loop "
        "with an aborted batch (each record once, offsets at the end); a second producer of "
        "the same transactional id fencing the first"
    )
    run_timeout = 300.0

    def install(self) -> dict[str, str]:
        go = _go()
        go_cache = compat_cache() / "go"
        env = go_env(go_cache)
        go_version = run_checked([go, "env", "GOVERSION"], "go env", env=env).strip()
        go_mod = (self.directory / "go.mod").read_text()
        sources = sorted(
            p for p in self.directory.iterdir() if p.name.endswith((".go", ".mod", ".sum"))
        )
        key = digest(go_version, env["GOFLAGS"], *(f"{p.name}\0{p.read_text()}" for p in sources))

        def build(tmp: Path) -> None:
            src = tmp / "src"
            src.mkdir()
            for path in sources:
                shutil.copy2(path, src / path.name)
            # Modules come from the proxy the first time, from GOMODCACHE after.
            run_checked(
                [go, "test", "-c", "-o", str(tmp / "franz_go.test"), "."],
                "go test -c (franz-go suite)",
                cwd=src,
                env=env,
            )
            run_checked(
                [go, "build", "-o", str(tmp / "test2json"), "cmd/test2json"],
                "go build cmd/test2json",
                cwd=src,
                env=env,
            )

        self.bin_dir = build_once(go_cache / f"franz-go-{key}", build)
        pins = _pins(go_mod)
        return {
            "franz-go": pins["github.com/twmb/franz-go"],
            "kadm": pins["github.com/twmb/franz-go/pkg/kadm"],
            "go": go_version.removeprefix("go"),
        }

    def command(self, ctx: RunContext) -> Command:
        test2json = [
            str(self.bin_dir / "test2json"), "-t", "-p", GROUP,
            str(self.bin_dir / "franz_go.test"), "-test.v=test2json", "-test.count=1",
            f"-test.timeout={self.run_timeout - 20:g}s",
        ]  # fmt: skip
        if ctx.selection:
            test2json.append(f"-test.run={ctx.selection}")
        args = [
            sys.executable, "-m", "compat.gotest",
            "--junit", str(ctx.junit_path), "--suite", GROUP, "--", *test2json,
        ]  # fmt: skip
        env = ctx.env()
        path = [str(COMPAT_ROOT), *filter(None, [env.get("PYTHONPATH")])]
        env["PYTHONPATH"] = os.pathsep.join(path)
        return Command(args, env, self.directory)
