"""A real ``langgraph dev`` server running ``examples/platform`` for the tests.

The server comes from ``langgraph-cli[inmem]`` (``pip install -e '.[platform]'``).
Without it the platform tests are skipped, except under CI (``CI=true``), where
a missing server is a failure: CI must run them.

Each server runs in a copy of the example directory, so its durable dev store
(``.langgraph_api/``) belongs to the test; a restart reuses the directory. The
server imports this worktree's ``langgraph_combee`` (``PYTHONPATH``), binds
127.0.0.1 on a free port (never 2024, the default, which another server may
hold) and logs to ``server.log`` in that directory.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "platform"
INSTALL_HINT = (
    "the LangGraph dev server is not installed: pip install -e '.[platform]' "
    "(langgraph-cli[inmem] and langgraph-sdk)"
)
START_SECONDS = 120.0  # generous: two shared cores, and the server imports a lot
STOP_SECONDS = 60.0


def langgraph_cli() -> str:
    """The ``langgraph`` command of this interpreter, or skip (fail under CI) without it."""
    cli = Path(sys.executable).with_name("langgraph")
    try:
        import langgraph_api  # noqa: F401
        import langgraph_runtime_inmem  # noqa: F401
        import langgraph_sdk  # noqa: F401
    except ImportError:
        cli = Path("/nonexistent")
    if not cli.exists():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but {INSTALL_HINT}", pytrace=False)
        pytest.skip(INSTALL_HINT)
    return str(cli)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (not 2024)."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port != 2024:
            return port


def copy_example(directory: Path) -> Path:
    """A copy of ``examples/platform`` in ``directory`` (without caches)."""
    target = directory / "app"
    shutil.copytree(EXAMPLE, target, ignore=shutil.ignore_patterns("__pycache__", ".langgraph_api"))
    return target


class DevServer:
    """One ``langgraph dev`` process on ``app_dir``; ``start()`` and ``stop()`` may repeat."""

    def __init__(self, app_dir: Path, *, env: dict[str, str] | None = None) -> None:
        self.app_dir = app_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = app_dir / "server.log"
        self._extra_env = env or {}
        self._proc: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0
        self.ready_at = 0.0

    def start(self) -> None:
        """Start the server and wait until it answers ``/ok``."""
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("LANGSMITH_", "LANGCHAIN_"))
        }
        env.update(
            PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
            LANGSMITH_TRACING="false",
            LANGGRAPH_CLI_NO_ANALYTICS="1",
            PYTHONUNBUFFERED="1",
            **self._extra_env,
        )
        command = [
            langgraph_cli(),
            "dev",
            "--no-browser",
            "--no-reload",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
        ]
        with self.log_path.open("ab") as log:
            log.write(f"\n==== start {time.time():.3f}\n".encode())
            self.started_at = time.monotonic()
            self._proc = subprocess.Popen(
                command,
                cwd=self.app_dir,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"langgraph dev exited at start:\n{self.log()[-4000:]}")
            try:
                if httpx.get(f"{self.url}/ok", timeout=2.0).status_code == 200:
                    self.ready_at = time.monotonic()
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
        self.stop()
        raise RuntimeError(
            f"langgraph dev did not answer in {START_SECONDS}s:\n{self.log()[-4000:]}"
        )

    def stop(self) -> int | None:
        """Stop as Ctrl-C does (SIGINT: the lifespan runs); kill after a grace period."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return None if proc is None else proc.returncode
        os.killpg(proc.pid, signal.SIGINT)
        try:
            return proc.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            return proc.wait(10)

    def log(self) -> str:
        """Everything the server wrote so far (all of its starts)."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
