"""``python -m ladder.transfer``: the data movement benchmark (see ``bench``)."""

import sys

from ladder.transfer.bench import main

sys.exit(main())
