"""``python -m elmo <command>``: see :mod:`elmo.cli`."""

import sys

from .cli import main

sys.exit(main())
