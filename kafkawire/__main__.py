"""``python -m kafkawire``: the ``kafkawire`` command."""
import sys

from .cli import main

sys.exit(main())
