"""``python -m zoo`` is the ``zoo`` command."""

import sys

from zoo.cli import main

sys.exit(main())
