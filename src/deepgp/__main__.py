"""``python -m deepgp``: the command line, as ``deepgp``."""

import sys

from .cli import main

sys.exit(main())
