"""`python -m berth.cli`."""

import sys

from berth.cli.root import main

sys.exit(main())
