"""``python -m sago_cli``: the ``sago`` command (subprocesses and tests start it this way)."""

import sys

from sago_cli.main import main

sys.exit(main())
