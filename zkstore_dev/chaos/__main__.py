"""``python -m zkstore_dev.chaos``: see :mod:`zkstore_dev.chaos.runner`."""

import sys

from zkstore_dev.chaos.runner import main

sys.exit(main())
