"""The images the check runs: the base images the repository's Dockerfile and compose file
name by PYTHON_IMAGE and ZOOKEEPER_IMAGE, and kpybroker's own image built on them.

Where no image registry is reachable, the official python:3.11-slim-bookworm and
zookeeper:3.8 images cannot be pulled, so the check builds stand-ins for them: a Debian
bookworm root file system from debootstrap (Python 3.11 and venv) imported as an image,
and Debian's zookeeper package on it (docker/zookeeper-standin.Dockerfile). If the host
reaches PyPI through a proxy that presents its own CA, the base image is made to trust the
CAs the host trusts beyond Debian's, and PIP_CERT points pip at them, so that the
Dockerfile's ``pip install`` works unchanged.
"""

from __future__ import annotations

import os
import re
import shutil
import ssl
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from containercheck.engine import CheckFailed, exists, inspect, need_root, run

ROOT = Path(__file__).resolve().parents[2]
STANDIN_PYTHON_IMAGE = "local/debian-python:3.11-bookworm"
STANDIN_ZOOKEEPER_IMAGE = "local/zookeeper:3.8"
ZOOKEEPER_STANDIN_DOCKERFILE = ROOT / "docker" / "zookeeper-standin.Dockerfile"
#: The name docker/compose.yaml gives the brokers' image, so that compose runs this build.
KPYBROKER_IMAGE = "kpybroker:latest"
DEBIAN_SUITE = "bookworm"
DEBOOTSTRAP_PACKAGES = "python3,python3-venv,ca-certificates"
#: What the official python images set, which an imported root file system lacks.
BASE_IMAGE_SETTINGS = (
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "ENV LANG=C.UTF-8",
    'CMD ["python3"]',
)
BUNDLE_IN_IMAGE = "/etc/ssl/certs/ca-certificates.crt"
PEM_CERTIFICATE = re.compile(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", re.S)


@dataclass(frozen=True)
class BaseImages:
    """The two images named by the build arguments, and how each was obtained."""

    python: str
    zookeeper: str
    how: str


def base_images(mirror: str, work_dir: Path) -> BaseImages:
    """PYTHON_IMAGE and ZOOKEEPER_IMAGE from the environment, pulled if absent; unset, the
    stand-ins, built if absent."""
    python = os.environ.get("PYTHON_IMAGE", STANDIN_PYTHON_IMAGE)
    zookeeper = os.environ.get("ZOOKEEPER_IMAGE", STANDIN_ZOOKEEPER_IMAGE)
    how = [
        obtain(
            python, STANDIN_PYTHON_IMAGE, lambda: build_python_standin(python, mirror, work_dir)
        ),
        obtain(
            zookeeper,
            STANDIN_ZOOKEEPER_IMAGE,
            lambda: build_zookeeper_standin(zookeeper, python, work_dir / "zookeeper-build.log"),
        ),
    ]
    return BaseImages(python, zookeeper, ", ".join(how))


def obtain(name: str, standin: str, build_standin: Callable[[], None]) -> str:
    """Make sure the image ``name`` exists: there already, built if it is the stand-in, or
    else pulled. Return which."""
    if exists("image", name):
        return f"{name} present"
    if name == standin:
        build_standin()
        return f"{name} built"
    run(["docker", "pull", name])
    return f"{name} pulled"


def build_python_standin(name: str, mirror: str, work_dir: Path) -> None:
    """debootstrap a minimal bookworm with Python, trusting the host's extra CAs, and import
    it as the image ``name``."""
    need_root("debootstrap")
    print(f"building {name} with debootstrap from {mirror} (a few minutes)", flush=True)
    rootfs = work_dir / "rootfs"
    log = work_dir / "debootstrap.log"
    try:
        debootstrap = ["debootstrap", "--variant=minbase", f"--include={DEBOOTSTRAP_PACKAGES}"]
        run([*debootstrap, DEBIAN_SUITE, str(rootfs), mirror], log=log)
        settings = list(BASE_IMAGE_SETTINGS)
        if trust_host_certificates(rootfs):
            settings.append(f"ENV PIP_CERT={BUNDLE_IN_IMAGE}")
        # The image's users run apt-get update first, as with the official images.
        for leftovers in ("var/lib/apt/lists", "var/cache/apt"):
            shutil.rmtree(rootfs / leftovers, ignore_errors=True)
        changes = [arg for setting in settings for arg in ("--change", setting)]
        with subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE) as tar:
            run(["docker", "import", *changes, "-", name], stdin=tar.stdout, log=log)
        if tar.returncode != 0:
            raise CheckFailed(f"tar of {rootfs} exited with {tar.returncode}")
    finally:
        shutil.rmtree(rootfs, ignore_errors=True)


def host_ca_bundle() -> Path:
    """The CA bundle pip and requests use on the host: the one their variables name, else the
    system's (OpenSSL's default file)."""
    for variable in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"):
        value = os.environ.get(variable)
        if value and Path(value).is_file():
            return Path(value)
    return Path(ssl.get_default_verify_paths().cafile or "/etc/ssl/certs/ca-certificates.crt")


def certificates(pem_text: str) -> dict[str, str]:
    """The PEM certificates in a bundle, keyed by their base64 body without white space."""
    return {"".join(pem.split()[2:-2]): pem for pem in PEM_CERTIFICATE.findall(pem_text)}


def trust_host_certificates(rootfs: Path) -> bool:
    """Add the CAs the host trusts and Debian's bundle lacks (a proxy's) to the root file
    system, where update-ca-certificates keeps them; return whether there were any."""
    image_bundle = rootfs / BUNDLE_IN_IMAGE.lstrip("/")
    in_image = certificates(image_bundle.read_text())
    extra = [
        pem
        for key, pem in certificates(host_ca_bundle().read_text()).items()
        if key not in in_image
    ]
    if not extra:
        return False
    local_cas = rootfs / "usr/local/share/ca-certificates"
    for number, pem in enumerate(extra):
        (local_cas / f"host-ca-{number}.crt").write_text(pem + "\n")
    run(["chroot", str(rootfs), "update-ca-certificates"])
    print(f"the base image trusts {len(extra)} CA(s) of the host's beyond Debian's", flush=True)
    return True


def build_zookeeper_standin(name: str, base: str, log: Path) -> None:
    print(f"building {name} from {ZOOKEEPER_STANDIN_DOCKERFILE.name}", flush=True)
    dockerfile = ZOOKEEPER_STANDIN_DOCKERFILE
    build = ["docker", "build", "-f", str(dockerfile), "--build-arg", f"BASE_IMAGE={base}"]
    run([*build, "-t", name, str(dockerfile.parent)], log=log)


def build_kpybroker(python_image: str, log: Path) -> float:
    """Build the repository's Dockerfile on ``python_image``; return the seconds it took."""
    print(f"building {KPYBROKER_IMAGE} on {python_image}", flush=True)
    start = time.monotonic()
    build = ["docker", "build", "--build-arg", f"PYTHON_IMAGE={python_image}"]
    run([*build, "-t", KPYBROKER_IMAGE, str(ROOT)], log=log)
    return time.monotonic() - start


def image_size(name: str) -> int:
    return int(inspect("image", name, "{{json .Size}}"))
