"""``python -m recovery.dev.chaos``: see :mod:`recovery.dev.chaos.runner`."""

import sys

from recovery.dev.chaos.runner import main

sys.exit(main())
