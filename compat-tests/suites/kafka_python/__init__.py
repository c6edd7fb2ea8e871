"""kafka-python's own integration test suite (from its PyPI sdist) against kpybroker."""
