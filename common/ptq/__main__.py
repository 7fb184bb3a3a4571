"""``python -m common.ptq``: see :mod:`common.ptq.cli`."""

import sys

from .cli import main

sys.exit(main())
