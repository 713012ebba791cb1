"""``python -m langgraph_combee.cli``: the ``combee`` command."""

import sys

from langgraph_combee.cli import main

sys.exit(main())
