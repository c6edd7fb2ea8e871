"""The compatibility suites, one package each (see compat-tests/README.md)."""
