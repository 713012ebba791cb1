"""A dependency-free token estimate shared by the playbook budget and the test doubles.

The estimate is deliberately simple and stable (about four characters a token, the
usual rule of thumb for English with BPE tokenizers): budgets and simulated latency
need a consistent measure, not a tokenizer-exact one.
"""

from __future__ import annotations

import math

CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    """Return an estimate of the number of tokens in ``text`` (0 for empty text)."""
    if not text:
        return 0
    return max(1, math.ceil(len(text) / CHARS_PER_TOKEN))
