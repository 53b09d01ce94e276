"""``python -m recovery.dev.upgrade``: see :mod:`recovery.dev.upgrade.run`."""

import sys

from recovery.dev.upgrade.run import main

sys.exit(main())
