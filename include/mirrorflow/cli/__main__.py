"""`python -m mirrorflow.cli`."""

import sys

from mirrorflow.cli import main

sys.exit(main())
