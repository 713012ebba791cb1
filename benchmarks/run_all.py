"""Run every benchmark as a script: ``python benchmarks/run_all.py [--quick]``.

The same as ``python -m benchmarks`` (what ``make bench`` and ``combee bench`` run);
see ``benchmarks/__main__.py`` for the options.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    # Run as a file: make the checkout importable so that "benchmarks.x" resolves.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.__main__ import main

if __name__ == "__main__":
    main()
