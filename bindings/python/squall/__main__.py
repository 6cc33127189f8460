"""`python3 -m squall`: the squall command (squall/cli.py)."""
import sys

from .cli import main

sys.exit(main())
