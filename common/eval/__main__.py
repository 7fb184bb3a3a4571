"""``python -m common.eval``: see ``common.eval.cli``."""

from .cli import main

raise SystemExit(main())
