"""Child-process entry point: run one xllamacpp server until told to stop.

Run as ``python path/to/_serve.py CONFIG_JSON``: as a plain script, so the child
imports only xllamacpp, not langgraph_combee and its dependencies. The server runs
in its own process because llama.cpp installs process-wide SIGINT/SIGTERM
handlers and spins its threads; in a child, the host keeps its own signals and
a stop is just terminating a process. The child exits on SIGTERM/SIGINT, and
when its standard input reaches end-of-file, which happens when the parent
closes the pipe or dies, so a crashed host never leaves a server behind.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from typing import Any

__all__ = ["build_params", "main"]


def build_params(xlc: Any, config: dict[str, Any]) -> Any:
    """Translate our config into an ``xllamacpp.CommonParams``."""
    params = xlc.CommonParams()
    params.model.path = config["model"]
    # Loopback only: the server has no API key and must not be reachable from outside.
    if hasattr(params, "hostnames"):
        params.hostnames = [config["host"]]
    else:  # older xllamacpp
        params.hostname = config["host"]
    params.port = int(config["port"])
    params.n_parallel = int(config["n_parallel"])
    params.n_ctx = int(config["n_ctx"])
    params.cont_batching = True
    threads = int(config["threads"])
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.sampling.seed = int(config["seed"])
    params.use_jinja = True
    alias = config["alias"]
    params.model_alias = alias if isinstance(params.model_alias, str) else {alias}
    for name, value in (("ui", False), ("cache_ram_mib", 1024)):
        if hasattr(params, name):
            setattr(params, name, value)
    return params


def main(argv: list[str] | None = None) -> None:
    """Start the server described by the JSON config in ``argv[0]`` and serve until stopped."""
    args = sys.argv[1:] if argv is None else argv
    config = json.loads(args[0])
    import xllamacpp as xlc  # type: ignore[import-untyped, import-not-found, unused-ignore]

    server = xlc.Server(build_params(xlc, config))  # returns once the model is loaded
    print(f"listening on {server.listening_address}", flush=True)

    # Installed after the server so they replace llama.cpp's own handlers.
    def _stop(signum: int, frame: object) -> None:
        os._exit(0)

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)

    parent_gone = threading.Event()

    def _watch_stdin() -> None:
        try:
            while sys.stdin.buffer.read(1):
                pass
        finally:
            parent_gone.set()

    threading.Thread(target=_watch_stdin, name="combee-parent-watch", daemon=True).start()
    # Wake up regularly so Python runs the signal handlers in this thread.
    while not parent_gone.wait(timeout=0.5):
        pass
    os._exit(0)


if __name__ == "__main__":
    main()
