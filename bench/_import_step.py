"""Imports the modules named on its command line and exits: the start of a step, without its work
(``bench/forkserver.py`` runs it cold and warm)."""

import importlib
import sys

for name in sys.argv[1:]:
    importlib.import_module(name)
