"""``python -m asr_tasks.cli``: the ``asr`` command."""

import sys

from asr_tasks.cli.main import main

sys.exit(main())
