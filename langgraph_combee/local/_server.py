"""Starting and stopping the loopback llama.cpp server (a child process).

The server listens on 127.0.0.1 only, on a free port unless one is given. It is
ready when ``/health`` answers 200, which llama.cpp does only once the model is
loaded. Stopping sends SIGTERM, waits, then kills; the child also exits by
itself when its parent's pipe closes (see ``_serve``).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from langgraph_combee._errors import LocalModelError

__all__ = ["HOST", "ServerConfig", "ServerProcess", "find_free_port", "port_taken"]

HOST = "127.0.0.1"
_PORT_ATTEMPTS = 3
_LOG_TAIL = 2000
_SERVE = Path(__file__).with_name("_serve.py")


def find_free_port(host: str = HOST) -> int:
    """A TCP port on ``host`` that nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def port_taken(host: str, port: int) -> bool:
    """True when something already holds ``host:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


@dataclass(frozen=True)
class ServerConfig:
    """What the child process needs to start the server."""

    model: str
    alias: str
    port: int
    n_parallel: int
    n_ctx: int
    threads: int
    seed: int
    host: str = HOST


def _health(url: str, timeout: float) -> bool:
    # No proxies: the server is on loopback, whatever the environment says.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=timeout) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


class ServerProcess:
    """One running server child. Use ``start`` to get one, ``stop`` to end it."""

    def __init__(self, proc: subprocess.Popen[bytes], config: ServerConfig, log: Path) -> None:
        self.proc = proc
        self.config = config
        self.log_path = log

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible API root, e.g. ``http://127.0.0.1:PORT/v1``."""
        return f"http://{self.config.host}:{self.config.port}/v1"

    @property
    def pid(self) -> int:
        """The child's process id."""
        return self.proc.pid

    def running(self) -> bool:
        """True while the child process is alive."""
        return self.proc.poll() is None

    def healthy(self, timeout: float = 2.0) -> bool:
        """True when the server answers its health endpoint with 200."""
        return _health(f"http://{self.config.host}:{self.config.port}/health", timeout)

    @classmethod
    def start(
        cls,
        config: ServerConfig,
        *,
        log_dir: Path,
        startup_timeout: float,
        pick_port: bool,
    ) -> ServerProcess:
        """Start a server and wait until it is healthy.

        Args:
            config: Model, port and sizing.
            log_dir: Where the child's output goes (one file per server).
            startup_timeout: Longest wait for the model to load, in seconds.
            pick_port: The port was chosen here; on a lost race for it, retry
                with another free port.

        Raises:
            LocalModelError: The server exited or did not become healthy in time.
        """
        log_dir.mkdir(parents=True, exist_ok=True)
        attempts = _PORT_ATTEMPTS if pick_port else 1
        for attempt in range(1, attempts + 1):
            server = cls._spawn(config, log_dir)
            error = server._wait_healthy(startup_timeout)
            if error is None:
                return server
            server.stop()
            # llama.cpp does not say why it failed to start; a port someone else now
            # holds means we lost the race for it.
            if attempt < attempts and port_taken(config.host, config.port):
                config = replace(config, port=find_free_port(config.host))
                continue
            if port_taken(config.host, config.port):
                error += f" (port {config.port} is in use)"
            raise LocalModelError(
                f"the local model server ({Path(config.model).name}) did not start: {error}; "
                f"log {server.log_path}:\n{server.read_log_tail()}"
            )
        raise AssertionError("unreachable")  # pragma: no cover

    @classmethod
    def _spawn(cls, config: ServerConfig, log_dir: Path) -> ServerProcess:
        log = log_dir / f"server-{Path(config.model).stem}-{os.getpid()}-{config.port}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, str(_SERVE), json.dumps(asdict(config))],
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=subprocess.STDOUT,
                # Its own session: a Ctrl-C meant for the host does not hit it; the host
                # stops it (atexit / close), and a dead host closes its stdin.
                start_new_session=True,
            )
        return cls(proc, config, log)

    def _wait_healthy(self, timeout: float) -> str | None:
        deadline = time.monotonic() + timeout
        delay = 0.1
        while time.monotonic() < deadline:
            if not self.running():
                return f"it exited with code {self.proc.returncode}"
            if self.healthy(timeout=min(2.0, max(0.1, deadline - time.monotonic()))):
                return None
            time.sleep(delay)
            delay = min(delay * 1.5, 1.0)
        return f"no healthy answer within {timeout:g} s"

    def read_log_tail(self) -> str:
        """The last part of the child's output (empty if there is none)."""
        try:
            data = self.log_path.read_bytes()
        except OSError:
            return ""
        return data[-_LOG_TAIL:].decode("utf-8", errors="replace")

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the child: close its stdin, SIGTERM, wait, then SIGKILL. Idempotent."""
        proc = self.proc
        if proc.stdin is not None and not proc.stdin.closed:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                proc.wait(timeout=timeout)
