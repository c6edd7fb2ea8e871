"""``python -m compat``: what ``compat-tests/run`` executes."""

from compat.cli import main

raise SystemExit(main())
