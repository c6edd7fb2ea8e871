"""kcat as Debian ships it: metadata, each compression codec, consuming, offsets by time, groups,
and the same over SASL and TLS."""

from __future__ import annotations

import re
import subprocess
from typing import ClassVar

from compat.install import InstallError, debian_version, ensure_commands
from compat.suite import PytestSuite

#: Debian bookworm's kcat, built on its librdkafka. Pinned by what ``kcat -V``
#: must report: another build is another row of the report, not this one.
KCAT_VERSION = "1.7.1"
LIBRDKAFKA_VERSION = "2.0.2"


class KcatSuite(PytestSuite):
    name = "kcat"
    title = "kcat (librdkafka)"
    summary = (
        "metadata, produce with each codec, consume, offsets by time, balanced groups; "
        "SASL PLAIN over SASL_PLAINTEXT and SASL_SSL, metadata over SSL with a client certificate"
    )
    what = (
        "kcat -L metadata; -P with each codec (none, gzip, snappy, lz4, zstd; batches checked "
        "compressed on the wire); -C with keys, headers and NULLs; -Q and -o s@ offsets by "
        "time; -G balanced group consume and resume; as a user with ACLs: produce (creating "
        "the topic) and -G over SASL_PLAINTEXT with PLAIN, produce (lz4) and -C over SASL_SSL "
        "with PLAIN and the CA file, -L over SSL with a client certificate (the topic hidden "
        "until DESCRIBE is granted); SCRAM refused as Kafka 4 refuses librdkafka < 2.6.1's "
        "(librdkafka#4895), and a missing client certificate refused with a TLS alert"
    )
    # kcat creates topics by producing to them (auto-creation), with this many partitions.
    broker_overrides: ClassVar[dict[str, object]] = {"num.partitions": 3}
    secured = True
    test_timeout = 120.0
    run_timeout = 600.0

    def install(self) -> dict[str, str]:
        ensure_commands({"kcat": "kcat"})
        banner = subprocess.run(["kcat", "-V"], capture_output=True, text=True, check=False)
        text = banner.stdout + banner.stderr
        kcat = re.search(r"Version (\S+)", text)
        librdkafka = re.search(r"librdkafka (\S+)", text)
        found = (kcat.group(1) if kcat else "?", librdkafka.group(1) if librdkafka else "?")
        if found != (KCAT_VERSION, LIBRDKAFKA_VERSION):
            raise InstallError(
                f"kcat -V reports kcat {found[0]} on librdkafka {found[1]}; this suite is pinned "
                f"to kcat {KCAT_VERSION} on librdkafka {LIBRDKAFKA_VERSION} (Debian bookworm)"
            )
        return {
            "kcat": KCAT_VERSION,
            "librdkafka": LIBRDKAFKA_VERSION,
            "Debian package": f"kcat {debian_version('kcat')}",
        }
