"""Benchmarks of langgraph-combee: learning speed and cost, and hot-path overhead.

Run them all with ``make bench`` or ``python -m benchmarks``; each script prints the
exact command that reproduces it and writes JSON to ``benchmarks/results/``.
"""
