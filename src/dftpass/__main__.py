"""``python -m dftpass`` is the same as the ``dftpass`` command."""

import sys

from dftpass.cli import main

sys.exit(main())
