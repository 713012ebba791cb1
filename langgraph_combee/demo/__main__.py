"""``python -m langgraph_combee.demo``."""

from langgraph_combee.demo._cli import main

raise SystemExit(main())
