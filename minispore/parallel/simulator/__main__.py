"""`python -m minispore.parallel.simulator ...`: see cli.py."""
import sys

from .cli import main

sys.exit(main())
