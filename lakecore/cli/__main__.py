"""``python -m lakecore.cli``: the ``lakecore`` command line."""

import sys

from lakecore.cli.main import main

sys.exit(main())
