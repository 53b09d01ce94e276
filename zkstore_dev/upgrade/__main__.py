"""``python -m zkstore_dev.upgrade``: see :mod:`zkstore_dev.upgrade.run`."""

import sys

from zkstore_dev.upgrade.run import main

sys.exit(main())
