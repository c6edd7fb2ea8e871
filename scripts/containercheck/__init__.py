"""``scripts/container-check``: builds kpybroker's container image and checks it on a real
Docker engine (docs/container.md). Too slow, and needing root and a Debian mirror, for CI."""
