import sys

from kpybroker.cli import main

sys.exit(main())
