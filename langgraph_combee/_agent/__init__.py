"""The agent side: what runs inside the host application's process, on its hot path.

Serving the learned prompt (the HEAD cache, version pinning, the canary router),
capturing runs as traces (the middleware, the tracer, the StateGraph helpers, the
capture buffer and its limits). Nothing here calls a learning LLM, and nothing here
imports the learner side: the two meet only through the store.
"""
