"""``python -m deepgp_bench``: the ``deepgp-bench`` command."""

import sys

from .cli import main

sys.exit(main())
