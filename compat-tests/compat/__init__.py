"""The compatibility runner: third-party clients, tools and test suites against kpybroker.

``compat-tests/run`` is the entry point (see ``compat-tests/README.md``). Every
suite is a :class:`compat.suite.Suite`; this package holds what they share:
installing pinned dependencies into a cache (:mod:`compat.install`), starting
fresh brokers (:mod:`compat.brokers`), running a test runner that writes JUnit
XML (:mod:`compat.runner`), judging each test against the suite's list of known
failures (:mod:`compat.expectations`), the JSON results (:mod:`compat.results`)
and the report card ``docs/compatibility.md`` (:mod:`compat.report`).
"""
