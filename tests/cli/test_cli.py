"""The ``combee`` command line, driven in-process with typer's CliRunner (no network)."""

from __future__ import annotations

import errno
import json
import os
import sys
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

import langgraph_combee.cli._delegate as delegate
from langgraph_combee import Trace
from langgraph_combee.cli import app, main
from langgraph_combee.cli._store import is_postgres, mask
from langgraph_combee.cli._traces import parse_lines
from langgraph_combee.testing import fake_learner
from langgraph_combee.types import PromptVersion
from tests.langsmith_server import langsmith_server

__all__ = ["langsmith_server"]

COMMANDS = [
    "demo",
    "learn",
    "versions",
    "show",
    "diff",
    "approve",
    "reject",
    "rollback",
    "export",
    "dead-letters",
    "steps",
    "bench",
]


def trace_line(i: int) -> str:
    return json.dumps(
        {
            "id": f"t{i}",
            "input": f"topic{i} ticket number {i} about topic{i}",
            "output": "GENERAL",
            "feedback": {"correct": False, "ground_truth": f"TEAM-{i}"},
        }
    )


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    for name in ("COMBEE_PROMPT_ID", "COMBEE_STORE", "COMBEE_TENANT", "COMBEE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    # Wide enough that rich tables do not wrap the values the tests look for.
    return CliRunner(env={"COLUMNS": "250"})


@pytest.fixture
def traces_file(tmp_path: Path) -> Path:
    """Four good traces; line 3 is malformed JSON."""
    lines = [trace_line(0), trace_line(1), "{not json", trace_line(2), "", trace_line(3)]
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "combee.db"


def run(runner: CliRunner, *args: str) -> Result:
    return runner.invoke(app, list(args))


def ok(result: Result) -> Result:
    assert result.exit_code == 0, result.output
    return result


def failed(result: Result, code: int, message: str) -> None:
    """A clean failure: the exit code, one 'error:' line naming the problem, no traceback."""
    assert result.exit_code == code, result.output
    assert f"error: {message}" in result.stderr, result.stderr
    assert "Traceback" not in result.output
    assert isinstance(result.exception, SystemExit)


def learn_manual(runner: CliRunner, traces: Path, db: Path, *extra: str) -> Result:
    return run(
        runner,
        "learn",
        str(traces),
        "--prompt-id",
        "router",
        "--model",
        "test",
        "--store",
        str(db),
        "--batch-size",
        "2",
        "--acceptance",
        "manual",
        *extra,
    )


# ---- help -----------------------------------------------------------------


def test_top_level_help_lists_every_command(runner: CliRunner) -> None:
    result = ok(run(runner, "--help"))
    for command in COMMANDS:
        assert command in result.output


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(runner: CliRunner, command: str) -> None:
    result = ok(run(runner, command, "--help"))
    assert f"combee {command}" in result.output


def test_no_arguments_shows_help(runner: CliRunner) -> None:
    result = run(runner)
    assert "learn" in result.output
    assert "Traceback" not in result.output


# ---- learn ------------------------------------------------------------------


def test_learn_reports_the_bad_line_and_learns_from_the_rest(
    runner: CliRunner, traces_file: Path, db: Path
) -> None:
    result = ok(run(runner, "learn", str(traces_file), "-p", "router", "-m", "test", "-s", str(db)))
    assert f"{traces_file}:3: skipped: not valid JSON" in result.stderr
    assert "learned from 4 trace(s)" in result.stdout
    assert "version" in result.stdout and "batch" in result.stdout  # the steps table
    assert db.exists()
    listing = ok(run(runner, "versions", "-p", "router", "-s", str(db))).stdout
    assert "accepted" in listing
    assert "accept_all" in listing


def test_learn_with_a_fixed_batch_size_runs_one_step_per_batch(
    runner: CliRunner, traces_file: Path, db: Path
) -> None:
    result = ok(learn_manual(runner, traces_file, db, "--no-progress"))
    assert "in 2 step(s)" in result.stdout
    assert "1 (pending)" in result.stdout and "2 (pending)" in result.stdout
    assert "pending candidates: 1, 2" in result.stdout
    assert "version 0 is in force" in result.stdout


def test_learn_over_several_epochs(runner: CliRunner, traces_file: Path, db: Path) -> None:
    result = ok(learn_manual(runner, traces_file, db, "--epochs", "2"))
    assert "in 4 step(s)" in result.stdout


def test_learn_reads_standard_input(runner: CliRunner, db: Path) -> None:
    stdin = "\n".join(trace_line(i) for i in range(3)) + "\n"
    result = runner.invoke(
        app, ["learn", "-", "-p", "router", "-m", "test", "-s", str(db)], input=stdin
    )
    assert ok(result).stdout.count("learned from 3 trace(s) of -") == 1


def test_learn_takes_prompt_store_and_model_from_the_environment(
    runner: CliRunner, traces_file: Path, db: Path
) -> None:
    env = {"COMBEE_PROMPT_ID": "router", "COMBEE_STORE": str(db), "COMBEE_MODEL": "test"}
    ok(runner.invoke(app, ["learn", str(traces_file)], env=env))
    assert "accepted" in ok(runner.invoke(app, ["versions"], env=env)).stdout


def test_learn_into_a_tenant_leaves_the_shared_playbook_alone(
    runner: CliRunner, traces_file: Path, db: Path
) -> None:
    ok(
        run(
            runner,
            "learn",
            str(traces_file),
            "-p",
            "r",
            "-m",
            "test",
            "-s",
            str(db),
            "--tenant",
            "acme",
        )
    )
    assert (
        "accepted"
        in ok(run(runner, "versions", "-p", "r", "-s", str(db), "--tenant", "acme")).stdout
    )
    shared = ok(run(runner, "versions", "-p", "r", "-s", str(db))).stdout
    assert "no versions yet" in shared


def test_learn_into_memory_warns_that_nothing_is_kept(runner: CliRunner, traces_file: Path) -> None:
    result = ok(run(runner, "learn", str(traces_file), "-p", "r", "-m", "test", "-s", "memory"))
    assert "--store memory keeps nothing" in result.stderr


def test_learn_missing_file(runner: CliRunner, tmp_path: Path, db: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    result = run(runner, "learn", str(missing), "-p", "r", "-m", "test", "-s", str(db))
    failed(result, 2, f"traces file not found: {missing}")
    assert not db.exists()


def test_learn_with_no_valid_line(runner: CliRunner, tmp_path: Path, db: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"input": "q", "id": ""}\n[1, 2]\n', encoding="utf-8")
    result = run(runner, "learn", str(path), "-p", "r", "-m", "test", "-s", str(db))
    failed(result, 1, f"no valid trace in {path} (2 line(s) skipped)")
    assert f"{path}:1: skipped: not a valid trace" in result.stderr
    assert f"{path}:2: skipped: expected a JSON object" in result.stderr


def test_learn_into_an_unreachable_store(
    runner: CliRunner, traces_file: Path, tmp_path: Path
) -> None:
    store = tmp_path / "no" / "such" / "dir" / "combee.db"
    result = run(runner, "learn", str(traces_file), "-p", "r", "-m", "test", "-s", str(store))
    failed(result, 2, "cannot open store")
    assert "does not exist" in result.stderr


def test_learn_needs_a_source(runner: CliRunner, db: Path) -> None:
    failed(
        run(runner, "learn", "-p", "r", "-m", "test", "-s", str(db)),
        2,
        "give either a TRACES file or --from-langsmith PROJECT",
    )


def test_learn_rejects_a_bad_batch_size(runner: CliRunner, traces_file: Path, db: Path) -> None:
    result = run(runner, "learn", str(traces_file), "-p", "r", "-m", "test", "-b", "zero")
    assert result.exit_code == 2
    assert "--batch-size" in result.output
    assert "Traceback" not in result.output


def test_learn_rejects_an_unknown_strategy(runner: CliRunner, traces_file: Path) -> None:
    result = run(runner, "learn", str(traces_file), "-p", "r", "-m", "test", "--strategy", "x")
    assert result.exit_code == 2
    assert "Traceback" not in result.output


def test_learn_with_a_model_init_chat_model_cannot_build(
    runner: CliRunner, traces_file: Path, db: Path
) -> None:
    result = run(runner, "learn", str(traces_file), "-p", "r", "-m", "nosuch:model", "-s", str(db))
    failed(result, 2, "--model='nosuch:model' is not allowed")
    assert len(result.stderr.strip().splitlines()) == 2  # the skipped line, then the error
    assert not db.exists()


def test_local_model_without_the_extra(
    runner: CliRunner, traces_file: Path, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "langgraph_combee.local", None)
    result = run(runner, "learn", str(traces_file), "-p", "r", "-m", "local:1.5b", "-s", str(db))
    failed(result, 2, "--model local:1.5b needs the 'local' extra")
    assert "pip install 'langgraph-combee[local]'" in result.stderr


def test_local_model_of_an_unknown_size(runner: CliRunner, traces_file: Path) -> None:
    result = run(runner, "learn", str(traces_file), "-p", "r", "-m", "local:70b")
    failed(result, 2, "--model='local:70b' is not allowed")


def test_local_model_is_built_with_its_size(
    runner: CliRunner, traces_file: Path, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sizes: list[str] = []

    def local_chat_model(size: str) -> Any:
        sizes.append(size)
        return fake_learner()

    module = types.ModuleType("langgraph_combee.local")
    module.local_chat_model = local_chat_model  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "langgraph_combee.local", module)
    ok(run(runner, "learn", str(traces_file), "-p", "r", "-m", "local:0.5b", "-s", str(db)))
    assert sizes == ["0.5b"]


def test_learn_from_langsmith(runner: CliRunner, db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, dict[str, Any]]] = []

    def traces_from_project(client: object, project: str, **options: Any) -> list[Trace]:
        calls.append((project, options))
        return [Trace.model_validate(json.loads(trace_line(i))) for i in range(3)]

    module = types.ModuleType("langgraph_combee.langsmith")
    module.traces_from_project = traces_from_project  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "langgraph_combee.langsmith", module)
    monkeypatch.setattr("langsmith.Client", lambda: object())
    result = ok(
        run(
            runner,
            "learn",
            "--from-langsmith",
            "prod",
            "--limit",
            "50",
            "-p",
            "r",
            "-m",
            "test",
            "-s",
            str(db),
        )
    )
    assert calls == [("prod", {"limit": 50})]
    assert "learned from 3 trace(s) of LangSmith project 'prod'" in result.stdout


def test_learn_from_langsmith_failure_is_one_line(
    runner: CliRunner, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def traces_from_project(client: object, project: str, **options: Any) -> list[Trace]:
        raise ConnectionError("connection refused")

    module = types.ModuleType("langgraph_combee.langsmith")
    module.traces_from_project = traces_from_project  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "langgraph_combee.langsmith", module)
    monkeypatch.setattr("langsmith.Client", lambda: object())
    result = run(
        runner, "learn", "--from-langsmith", "prod", "-p", "r", "-m", "test", "-s", str(db)
    )
    failed(result, 1, "cannot read traces from LangSmith project 'prod': ConnectionError")


def _loopback_langsmith(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    import langsmith

    monkeypatch.setenv("LANGSMITH_ENDPOINT", url)
    monkeypatch.setenv("LANGSMITH_API_KEY", "test")
    real_client = langsmith.Client
    monkeypatch.setattr("langsmith.Client", lambda: real_client(auto_batch_tracing=False))


def test_learn_from_a_langsmith_project_on_the_loopback_server(
    runner: CliRunner, db: Path, monkeypatch: pytest.MonkeyPatch, langsmith_server: str
) -> None:
    from tests.langsmith.test_langsmith import _feedback, _run, _serve_project

    _serve_project(
        [_run(1, "GENERAL"), _run(2, "GENERAL")],
        [_feedback(1, "correctness", 0.0, correction="FIN-7")],
    )
    _loopback_langsmith(monkeypatch, langsmith_server)
    result = ok(
        run(runner, "learn", "--from-langsmith", "prod", "-p", "r", "-m", "test", "-s", str(db))
    )
    assert "learned from 2 trace(s) of LangSmith project 'prod'" in result.stdout
    shown = ok(run(runner, "show", "1", "-p", "r", "-s", str(db))).stdout
    assert "FIN-7" in shown


def test_a_missing_langsmith_project_is_one_line(
    runner: CliRunner, db: Path, monkeypatch: pytest.MonkeyPatch, langsmith_server: str
) -> None:
    from tests.langsmith_server import Recorder

    Recorder.responses = {("GET", "/sessions"): []}
    _loopback_langsmith(monkeypatch, langsmith_server)
    result = run(
        runner, "learn", "--from-langsmith", "nope", "-p", "r", "-m", "test", "-s", str(db)
    )
    failed(result, 1, "cannot read traces from LangSmith project 'nope': LangSmithNotFoundError")
    [line] = [x for x in result.stderr.splitlines() if x.strip()]  # one line, no SDK log noise
    assert line.startswith("error: ")


# ---- versions, show, diff, approve, reject, rollback, export -----------------


def test_the_review_flow_on_a_sqlite_file(
    runner: CliRunner, traces_file: Path, db: Path, tmp_path: Path
) -> None:
    ok(learn_manual(runner, traces_file, db))
    common = ["-p", "router", "-s", str(db)]

    listing = ok(run(runner, "versions", *common)).stdout
    assert listing.count("candidate") == 2 and listing.count("pending") == 2

    shown = ok(run(runner, "show", "1", *common)).stdout
    assert "candidate" in shown
    assert "'TEAM-" in shown  # a learned rule, rendered
    assert "[oth-" in shown  # bullet ids are text, not markup

    changes = ok(run(runner, "diff", "0", "1", *common)).stdout
    assert "v0 -> v1: +2 -0 ~0" in changes
    assert changes.count("\n+ [") == 2

    assert (
        "version 1 accepted" in ok(run(runner, "approve", "1", *common, "-r", "looks right")).stdout
    )
    assert "version 1 stays in force" in ok(run(runner, "reject", "2", *common)).stdout
    listing = ok(run(runner, "versions", *common)).stdout
    assert "*1" in listing and "manual: looks right" in listing and "rejected" in listing

    markdown = ok(run(runner, "export", "1", *common, "--format", "md")).stdout
    assert markdown.startswith("# Prompt `router`, version 1")
    assert "## Learned playbook" in markdown

    exported = ok(run(runner, "export", "1", *common, "--format", "json")).stdout
    record = PromptVersion.model_validate_json(exported)
    assert record.version == 1 and record.status == "accepted"

    out = tmp_path / "v1.json"
    ok(run(runner, "export", "1", *common, "-f", "json", "-o", str(out)))
    assert PromptVersion.model_validate_json(out.read_text(encoding="utf-8")) == record

    rolled = ok(run(runner, "rollback", "0", *common, "--reason", "start over")).stdout
    assert "version 3 is now in force" in rolled
    head = ok(run(runner, "show", *common)).stdout
    assert "3 (in force)" in head and "rollback to v0: start over" in head
    assert "(empty playbook)" in head


def test_versions_of_a_mistyped_prompt_id_names_the_prompts_held(
    runner: CliRunner, traces_file: Path, db: Path
) -> None:
    ok(learn_manual(runner, traces_file, db))
    result = run(runner, "versions", "-p", "ruoter", "-s", str(db))
    failed(result, 1, f"store {str(db)!r} has no prompt 'ruoter'; it holds: 'router'")
    for command in (["show"], ["export"], ["diff", "0", "1"]):
        result = run(runner, *command, "-p", "ruoter", "-s", str(db))
        failed(result, 1, f"store {str(db)!r} has no prompt 'ruoter'")


def test_bad_version_number(runner: CliRunner, traces_file: Path, db: Path) -> None:
    ok(learn_manual(runner, traces_file, db))
    common = ["-p", "router", "-s", str(db)]
    failed(run(runner, "show", "99", *common), 1, "prompt 'router' has no version 99")
    failed(run(runner, "diff", "0", "99", *common), 1, "prompt 'router' has no version 99")
    failed(run(runner, "export", "99", *common), 1, "prompt 'router' has no version 99")
    failed(run(runner, "approve", "99", *common), 1, "prompt 'router' has no version 99")
    failed(run(runner, "approve", "0", *common), 1, "cannot accept version 0")
    failed(run(runner, "rollback", "1", *common), 1, "cannot roll prompt 'router' back")
    result = run(runner, "show", "abc", *common)
    assert result.exit_code == 2 and "Traceback" not in result.output


def test_reading_commands_never_create_a_store(runner: CliRunner, db: Path) -> None:
    failed(run(runner, "versions", "-p", "r", "-s", str(db)), 2, f"store '{db}' does not exist")
    assert not db.exists()


def test_unreachable_store_for_reading_commands(runner: CliRunner, tmp_path: Path) -> None:
    store = str(tmp_path / "missing-dir" / "combee.db")
    for args in (["versions"], ["show", "1"], ["approve", "1"], ["export", "1"]):
        failed(run(runner, *args, "-p", "r", "-s", store), 2, "cannot open store")


def test_a_file_that_is_not_a_database(runner: CliRunner, tmp_path: Path) -> None:
    store = tmp_path / "notes.txt"
    store.write_text("hello, not SQLite\n" * 100, encoding="utf-8")
    failed(run(runner, "versions", "-p", "r", "-s", str(store)), 2, "cannot open SQLite store")


def test_sqlite_url_form(runner: CliRunner, traces_file: Path, db: Path) -> None:
    ok(run(runner, "learn", str(traces_file), "-p", "r", "-m", "test", "-s", f"sqlite:///{db}"))
    assert "accepted" in ok(run(runner, "versions", "-p", "r", "-s", str(db))).stdout


def test_postgres_without_the_extra(runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langgraph.store.postgres", None)
    result = run(runner, "versions", "-p", "r", "-s", "postgresql://u:secret@localhost/db")
    failed(
        result,
        2,
        "a PostgreSQL store (postgresql://...) needs the 'postgres' extra: "
        "pip install 'langgraph-combee[postgres]'",
    )
    assert "secret" not in result.output


def test_learn_and_review_on_postgres(
    runner: CliRunner, traces_file: Path, postgres_dsn: str
) -> None:
    common = ["-p", "router", "-s", postgres_dsn]
    ok(run(runner, "learn", str(traces_file), *common, "-m", "test", "--acceptance", "manual"))
    assert "candidate" in ok(run(runner, "versions", *common)).stdout
    assert "it is now in force" in ok(run(runner, "approve", "1", *common)).stdout
    failed(run(runner, "show", "9", *common), 1, "prompt 'router' has no version 9")


def test_unreachable_postgres_is_one_line(runner: CliRunner) -> None:
    pytest.importorskip("langgraph.store.postgres")
    # Port 1 on the loopback address: nothing listens there, the connection is refused.
    dsn = "postgresql://u:secret@127.0.0.1:1/db?connect_timeout=2"
    result = run(runner, "versions", "-p", "r", "-s", dsn)
    failed(result, 2, "cannot open PostgreSQL store 'postgresql://u:***@127.0.0.1:1/db")
    assert "secret" not in result.output


def test_key_value_dsns_are_postgres_not_file_names(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "langgraph.store.postgres", None)
    dsn = "host=127.0.0.1 dbname=combee user=u password=secret"
    args = ["learn", "-", "-p", "r", "-m", "test", "-s", dsn]
    result = runner.invoke(app, args, input=trace_line(0))
    failed(
        result,
        2,
        "a PostgreSQL store (postgresql://...) needs the 'postgres' extra: "
        "pip install 'langgraph-combee[postgres]'",
    )
    assert list(tmp_path.iterdir()) == []
    assert is_postgres(dsn) and is_postgres("postgres://h/db")
    assert not is_postgres("combee.db") and not is_postgres("runs/host=1.db")


def test_mask_hides_passwords() -> None:
    assert mask("postgresql://u:secret@host:5432/db") == "postgresql://u:***@host:5432/db"
    assert mask("postgresql://host/db") == "postgresql://host/db"
    assert mask("postgresql://u:pw@h/db", "bad dsn 'postgresql://u:pw@h/db'") == (
        "bad dsn 'postgresql://u:***@h/db'"
    )
    assert mask("postgresql://h/db", "no password here") == "no password here"
    assert mask("host=h password=secret dbname=d") == "host=h password=*** dbname=d"
    assert mask("host=h password='s p' dbname=d", "failed for 's p'") == "failed for ***"
    # An "@" written unencoded in the password: all of it is hidden, not only
    # what comes before its first "@".
    assert mask("postgresql://u:p@ss@host/db") == "postgresql://u:***@host/db"
    # A third review: "/", "?" or "#" in the password, and a driver quoting a piece of it.
    assert mask("mysql://admin:Tr0ub4/dor@db.example.com/prod") == (
        "mysql://admin:***@db.example.com/prod"
    )
    assert mask("mysql://u:pa#ss@h/db") == "mysql://u:***@h/db"
    assert mask("host=db password=correct horse battery dbname=app") == (
        "host=db password=*** dbname=app"
    )
    assert mask("host=db password=a b") == "host=db password=***"
    assert mask("postgresql://u:pa?ss@h/db") == "postgresql://u:***@h/db"
    assert "ss9word" not in mask(
        "postgresql://u:p@ss9word@127.0.0.1:1/db", "failed to resolve host 'ss9word@127.0.0.1'"
    )


def test_prompt_id_is_required(runner: CliRunner, db: Path) -> None:
    result = run(runner, "versions", "-s", str(db))
    assert result.exit_code == 2
    assert "--prompt-id" in result.output


def test_export_to_a_missing_directory(
    runner: CliRunner, traces_file: Path, db: Path, tmp_path: Path
) -> None:
    ok(learn_manual(runner, traces_file, db))
    out = tmp_path / "missing" / "v1.md"
    failed(
        run(runner, "export", "1", "-p", "router", "-s", str(db), "-o", str(out)),
        2,
        f"cannot write {out}: directory '{out.parent}' does not exist",
    )


# ---- demo and bench -----------------------------------------------------------


def test_demo_passes_its_arguments_through(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[list[str]] = []

    def demo_main(argv: Sequence[str] | None = None) -> int:
        seen.append(list(argv or []))
        return 0

    module = types.ModuleType("langgraph_combee.demo")
    module.main = demo_main  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "langgraph_combee.demo", module)
    ok(run(runner, "demo", "--model", "test", "--tickets", "12"))
    assert seen == [["--model", "test", "--tickets", "12"]]


def test_demo_exit_code_is_kept(runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("langgraph_combee.demo")
    module.main = lambda argv=None: 3  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "langgraph_combee.demo", module)
    assert run(runner, "demo").exit_code == 3


def test_demo_missing(runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langgraph_combee.demo", None)
    failed(run(runner, "demo"), 1, "the demo is not part of this install")


def test_bench_runs_the_checkout_runner(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "benchmarks" / "run_all.py"
    script.parent.mkdir()
    out = tmp_path / "args.json"
    script.write_text(
        "import json, sys\n"
        f"open({str(out)!r}, 'w').write(json.dumps(sys.argv[1:]))\n"
        "sys.exit(4 if '--fail' in sys.argv else 0)\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(delegate, "search_roots", lambda: [tmp_path])
    ok(run(runner, "bench", "--quick", "-n", "3"))
    assert json.loads(out.read_text(encoding="utf-8")) == ["--quick", "-n", "3"]
    assert run(runner, "bench", "--fail").exit_code == 4


def test_bench_outside_a_checkout(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(delegate, "search_roots", lambda: [tmp_path])
    failed(run(runner, "bench"), 2, "benchmarks/run_all.py not found")


# ---- main() and the JSONL reader ------------------------------------------------


def test_main_returns_the_exit_code(
    traces_file: Path, db: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    assert (
        main(["learn", str(traces_file), "-p", "r", "-m", "test", "-s", str(db), "--no-progress"])
        == 0
    )
    assert main(["show", "42", "-p", "r", "-s", str(db)]) == 1
    assert "error: prompt 'r' has no version 42" in capsys.readouterr().err
    assert main(["--help"]) == 0


def test_parse_lines_numbers_every_bad_line() -> None:
    loaded = parse_lines(
        [
            trace_line(0).encode(),
            b"\xff\xfe not utf-8",
            b"   ",
            b'"a string"',
            b'{"feedback": {"correct": "maybe"}}',
            trace_line(1).encode(),
        ]
    )
    assert [t.id for t in loaded.traces] == ["t0", "t1"]
    assert [(e.line, e.reason.split(" (")[0]) for e in loaded.errors] == [
        (2, "not UTF-8"),
        (4, "expected a JSON object, got str"),
        (5, "not a valid trace"),
    ]
    assert loaded.lines == 6


# ---- hostile input ------------------------------------------------------------


def test_learn_reports_a_line_nested_too_deeply(
    runner: CliRunner, tmp_path: Path, db: Path
) -> None:
    path = tmp_path / "deep.jsonl"
    path.write_text(trace_line(0) + "\n" + "[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    result = run(runner, "learn", str(path), "-p", "r", "-m", "test", "-s", str(db))
    assert f"{path}:2: skipped: not readable: JSON nested too deeply" in result.stderr
    ok(result)  # the good line is still learned
    assert "RecursionError" not in result.output


def test_learn_refuses_lines_without_trace_fields_before_any_call(
    runner: CliRunner, tmp_path: Path, db: Path
) -> None:
    path = tmp_path / "foo.jsonl"
    path.write_text('{"foo": 1}\n{"bar": [2], "id": "x"}\n', encoding="utf-8")
    result = run(runner, "learn", str(path), "-p", "r", "-m", "test", "-s", str(db))
    failed(result, 1, f"no valid trace in {path} (2 line(s) skipped)")
    assert f"{path}:1: skipped: no trace field (found: foo;" in result.stderr
    assert f"{path}:2: skipped: no trace field (found: bar, id;" in result.stderr
    assert not db.exists()  # refused before the store was opened or a learner called


def test_learn_skips_a_line_with_a_misspelled_field_naming_it(
    runner: CliRunner, tmp_path: Path, db: Path
) -> None:
    # A misspelled field was ignored, so the line was learned from
    # as a trace without its feedback.
    path = tmp_path / "typo.jsonl"
    typo = json.dumps({"input": "x", "output": "y", "feedbak": {"correct": False}})
    path.write_text(f"{trace_line(0)}\n{typo}\n", encoding="utf-8")
    result = ok(run(runner, "learn", str(path), "-p", "r", "-m", "test", "-s", str(db)))
    assert (
        f"{path}:2: skipped: not a valid trace (Value error, unknown Trace field(s): "
        "'feedbak' (did you mean 'feedback'?))"
    ) in result.stderr
    assert "learned from 1 trace(s)" in result.stdout


def test_learn_accepts_a_utf8_byte_order_mark(runner: CliRunner, tmp_path: Path, db: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + (trace_line(0) + "\n" + trace_line(1) + "\n").encode())
    result = ok(run(runner, "learn", str(path), "-p", "r", "-m", "test", "-s", str(db)))
    assert "learned from 2 trace(s)" in result.stdout and "skipped" not in result.stderr


def test_versions_on_an_unrelated_sqlite_file_leaves_it_unchanged(
    runner: CliRunner, tmp_path: Path
) -> None:
    import sqlite3

    path = tmp_path / "app.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE people (name TEXT)")
    before = path.read_bytes()
    result = run(runner, "versions", "-p", "r", "-s", str(path))
    failed(
        result,
        2,
        f"store {str(path)!r} is a SQLite file without LangGraph store tables, not a Combee store",
    )
    assert path.read_bytes() == before
    with sqlite3.connect(path) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    assert tables == ["people"]


def test_show_minus_one_says_versions_start_at_zero(
    runner: CliRunner, traces_file: Path, db: Path
) -> None:
    ok(learn_manual(runner, traces_file, db))
    for command in ("show", "export", "approve", "rollback"):
        result = run(runner, command, "-1", "-p", "router", "-s", str(db))
        failed(result, 2, "no version -1: versions are numbered from 0")
        assert "No such option" not in result.output


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_export_into_a_folder_that_takes_no_files_says_why(
    runner: CliRunner, traces_file: Path, db: Path
) -> None:
    # /proc exists but takes no new files, even for root (which a chmod would not stop);
    # it answers "no such file": the message says so, not a permission it did not deny.
    ok(learn_manual(runner, traces_file, db))
    result = run(runner, "export", "-p", "router", "-s", str(db), "-o", "/proc/combee.md")
    failed(
        result,
        2,
        "cannot write /proc/combee.md: no such file or directory "
        "(directory '/proc' exists but takes no new files)",
    )
    assert "file not found" not in result.stderr and "permission" not in result.stderr


def test_export_onto_a_directory_says_it_is_one(
    runner: CliRunner, traces_file: Path, db: Path, tmp_path: Path
) -> None:
    ok(learn_manual(runner, traces_file, db))
    result = run(runner, "export", "-p", "router", "-s", str(db), "-o", str(tmp_path))
    failed(result, 2, f"cannot write {tmp_path}: it is a directory")


def test_export_reports_the_system_reason_for_other_write_failures(
    runner: CliRunner, traces_file: Path, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ok(learn_manual(runner, traces_file, db))
    out = db.parent / "v.md"

    def full(self: Path, *args: object, **kwargs: object) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))

    monkeypatch.setattr(Path, "write_text", full)
    result = run(runner, "export", "-p", "router", "-s", str(db), "-o", str(out))
    failed(result, 2, f"cannot write {out}: {os.strerror(errno.ENOSPC).lower()}")


def test_an_empty_prompt_id_is_a_bad_argument_like_an_empty_tenant(
    runner: CliRunner, traces_file: Path, db: Path, tmp_path: Path
) -> None:
    ok(learn_manual(runner, traces_file, db))
    for command in (["versions"], ["show"], ["export"], ["dead-letters"], ["steps"]):
        result = run(runner, *command, "-p", "", "-s", str(db))
        failed(result, 2, "prompt_id='' is not allowed: a non-empty string")
        failed(run(runner, *command, "-p", "router", "--tenant", "", "-s", str(db)), 2, "tenant=''")
    # learn refuses before it opens (and would create) the store.
    fresh = tmp_path / "fresh.db"
    for bad, name in ((["-p", ""], "prompt_id"), (["-p", "router", "--tenant", ""], "tenant")):
        result = run(runner, "learn", str(traces_file), *bad, "-m", "test", "-s", str(fresh))
        failed(result, 2, f"{name}='' is not allowed: a non-empty string")
    assert not fresh.exists()


def test_store_urls_are_never_taken_for_files_and_passwords_stay_masked(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for store, reason in (
        ("mysql://u:s3cret@db/app", "unsupported scheme 'mysql'"),
        ("postgresql+asyncpg://u:s3cret@db/app", "unsupported driver 'asyncpg'"),
        ("sqlite://", "a sqlite URL names its file after a third slash"),
    ):
        result = run(runner, "versions", "-p", "vet", "-s", store)
        failed(result, 2, f"cannot open store '{mask(store)}': {reason}")
        assert "s3cret" not in result.output
    assert list(tmp_path.iterdir()) == []


def test_dead_letters_lists_retries_and_drops_parked_traces(
    runner: CliRunner, traces_file: Path, db: Path
) -> None:
    from langgraph.store.sqlite import SqliteStore

    from langgraph_combee._storage import TraceQueue

    ok(learn_manual(runner, traces_file, db))
    common = ["-p", "router", "-s", str(db)]
    assert "has no dead letters" in ok(run(runner, "dead-letters", *common)).stdout
    with SqliteStore.from_conn_string(str(db)) as store:
        queue = TraceQueue(store, "router")
        queue.put_many([Trace(id="bad-1", input="blocked text"), Trace(id="bad-2", input="x")])
        queue.claim(2, holder="learner")
        queue.fail(["bad-1", "bad-2"], reason="BadRequestError: content filter")
        assert queue.park(["bad-1", "bad-2"], reason="BadRequestError: content filter") == 2
    listed = ok(run(runner, "dead-letters", *common)).stdout
    assert "2 dead letter(s)" in listed and "bad-1" in listed and "blocked text" in listed
    assert "BadRequestError: content filter" in listed
    retried = ok(run(runner, "dead-letters", "--retry", "bad-1", *common)).stdout
    assert "1 dead letter(s) queued again: bad-1" in retried
    failed(run(runner, "dead-letters", "--drop", "bad-1", *common), 1, "not parked")
    failed(run(runner, "dead-letters", "--drop", *common), 2, "--drop needs trace ids or --all")
    failed(run(runner, "dead-letters", "bad-2", *common), 2, "trace ids and --all go with")
    dropped = ok(run(runner, "dead-letters", "--drop", "--all", *common)).stdout
    assert "1 dead letter(s) dropped: bad-2" in dropped
    with SqliteStore.from_conn_string(str(db)) as store:
        queue = TraceQueue(store, "router")
        assert queue.status("bad-1") == "pending" and queue.status("bad-2") == "done"


def test_postgres_going_away_mid_command_is_one_line(
    runner: CliRunner, traces_file: Path, postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    psycopg = pytest.importorskip("psycopg")
    from langgraph.store.postgres import PostgresStore

    common = ["-p", "router", "-s", postgres_dsn]
    ok(run(runner, "learn", str(traces_file), "-m", "test", "--batch-size", "4", *common))

    def gone(self: object, ops: object) -> object:
        # What the driver raises when the server dies between two queries.
        raise psycopg.OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(PostgresStore, "batch", gone)
    for command in (["versions"], ["approve", "1"], ["rollback", "1"], ["show", "1"]):
        result = run(runner, *command, *common)
        failed(result, 1, "PostgreSQL store error: server closed the connection unexpectedly")
        assert "Traceback" not in result.output


def test_steps_lists_each_learning_step_newest_first_with_its_reasons(
    runner: CliRunner, traces_file: Path, db: Path
) -> None:
    common = ["-p", "router", "-s", str(db)]
    ok(learn_manual(runner, traces_file, db))
    lines = ok(run(runner, "steps", *common)).stdout.strip().splitlines()
    assert len(lines) == 2  # four traces in batches of two
    assert "2 traces; rules: 2 proposed, 2 written" in lines[0]
    assert "reasons: none" in lines[0]
    # Manual acceptance: each version waits for a person; the newest comes first.
    assert lines[0].endswith("version 2 waits for a decision (a candidate)")
    assert lines[1].endswith("version 1 waits for a decision (a candidate)")
    records = json.loads(ok(run(runner, "steps", "--json", "--limit", "1", *common)).stdout)
    assert [r["version"] for r in records] == [2]
    assert records[0]["rules"]["written"] == 2
    assert records[0]["reasons"] == {}
    assert records[0]["summary"] in lines[0]
    failed(run(runner, "steps", "--limit", "0", *common), 2, "--limit=0 is not allowed")


def test_steps_of_a_prompt_that_never_learned(runner: CliRunner, db: Path) -> None:
    from langgraph.store.sqlite import SqliteStore

    from langgraph_combee._storage import TraceQueue

    with SqliteStore.from_conn_string(str(db)) as store:
        store.setup()
        TraceQueue(store, "quiet").put(Trace(id="t", input="x"))
    said = ok(run(runner, "steps", "-p", "quiet", "-s", str(db))).stdout
    assert "prompt 'quiet' has no learning steps recorded yet" in said
    assert json.loads(ok(run(runner, "steps", "--json", "-p", "quiet", "-s", str(db))).stdout) == []


def test_steps_json_stays_valid_json_whatever_the_store_holds(runner: CliRunner, db: Path) -> None:
    from langgraph.store.sqlite import SqliteStore

    from langgraph_combee._storage import TraceQueue
    from langgraph_combee._storage.steps import StepLog, StepRecord

    with SqliteStore.from_conn_string(str(db)) as store:
        store.setup()
        TraceQueue(store, "odd").put(Trace(id="t", input="x"))
        log = StepLog(store, "odd")
        log.add(StepRecord(summary="fine", seconds=1.5))
        # Written by hand or another release: numbers as text that read as non-finite.
        space = log._namespace
        store.put(space, "99999999999999999997-inf", {"summary": "slow", "seconds": "Infinity"})
        store.put(space, "99999999999999999998-nan", {"summary": "odd", "seconds": "NaN"})
        store.put(space, "99999999999999999999-corrupt", {"rules": "not counts"})

    def strict(constant: str) -> None:
        raise AssertionError(f"{constant} is not JSON")

    said = ok(run(runner, "steps", "--json", "-p", "odd", "-s", str(db))).stdout
    records = json.loads(said, parse_constant=strict)
    # The corrupt record is skipped; a non-finite number reads as null.
    assert [(r["summary"], r["seconds"]) for r in records] == [
        ("odd", None),
        ("slow", None),
        ("fine", 1.5),
    ]
