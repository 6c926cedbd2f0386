"""``python -m ladder``: the same as the ``ladder`` command."""

import sys

from ladder.cli import main

sys.exit(main())
