"""``python -m zoo.cli`` is the ``zoo`` command (as ``python -m zoo`` is)."""

import sys

from zoo.cli import main

sys.exit(main())
