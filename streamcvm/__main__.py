"""``python -m streamcvm``: the command line (:mod:`streamcvm.cli`)."""
import sys

from .cli import main

sys.exit(main())
