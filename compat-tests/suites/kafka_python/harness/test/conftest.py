"""Supplied by kpybroker's compat-tests in place of the file the sdist leaves out.

The upstream file holds fixtures for the unit tests (a mock broker and
friends); the integration tests need none of them, only their own
``test/integration/conftest.py``, which the sdist does ship.
"""
