"""The guard's pattern families are data: every shipped file loads, and a bad one says where."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from langgraph_combee._guard import lexicon
from langgraph_combee._guard import patterns as rules
from langgraph_combee._guard.lexicon import LexiconError, build, parse


def _shipped() -> dict[str, str]:
    # Read as package data, as an installed wheel is read.
    folder = resources.files("langgraph_combee._guard").joinpath("data")
    return {f.name: f.read_text(encoding="utf-8") for f in folder.iterdir() if f.is_file()}


def test_every_shipped_data_file_loads_and_every_entry_is_documented() -> None:
    files = _shipped()
    assert {name for name in files if name.endswith(".toml")} == set(files)  # nothing else
    assert {"override.toml", "exfiltration.toml", "scope.toml", "policy_loosen.toml"} <= set(files)
    for name, text in files.items():
        entries = parse(name, text)
        assert entries, name
        for found in entries.values():
            for entry in found if isinstance(found, tuple) else (found,):
                assert entry.doc.strip() and entry.file == name
    built = build(files)
    for entry in built.entries.values():
        if entry.kind == "pattern":
            assert isinstance(lexicon.pattern(entry.name), re.Pattern)
    assert {name: len(f) for name, f in built.families.items()} == {
        "override": 17,
        "exfiltration": 5,
        "secret": 9,
    }


def test_the_data_files_ship_in_the_wheel() -> None:
    # hatchling packages every file under langgraph_combee/ that git tracks; nothing in the
    # build configuration leaves data files out.
    root = resources.files("langgraph_combee")
    config = lexicon.tomllib.loads(root.joinpath("..", "pyproject.toml").read_text("utf-8"))
    wheel = config["tool"]["hatch"]["build"]["targets"]["wheel"]
    assert wheel["packages"] == ["langgraph_combee"]
    assert not {"exclude", "only-include", "artifacts"} & set(wheel)


def test_the_engine_compiles_each_pattern_once() -> None:
    assert lexicon.pattern("loosen") is lexicon.pattern("loosen")
    assert lexicon.shipped() is lexicon.shipped()
    assert rules.OVERRIDE[0] is lexicon.family("override")[0][1]


def test_verbs_are_read_in_every_form_and_references_are_inserted() -> None:
    files = {
        "verbs.toml": '[irregular]\ndoc = "x"\n[irregular.map]\ngive = "gave given"\n',
        "a.toml": (
            '[give]\ndoc = "x"\nverbs = ["give", "read out"]\n'
            '[more]\ndoc = "x"\nverbs = ["${give}", "copy"]\n'
            "[act]\ndoc = \"x\"\nfold = true\npattern = ['\\b(${more})\\b', ' nötig']\n"
        ),
    }
    built = build(files)
    act = lexicon._compile(built, built.entries["act"])
    for text in ("gave notig", "reading out notig", "copies notig", "given notig"):
        assert act.search(text), text
    assert not act.search("give nötig")  # folded: its own accent taken off
    text = lexicon._text(built, built.entries["more"])
    forms = text.split("|")
    assert {"gave", "given", "copies", "copied", "reads out"} <= set(forms)
    assert [len(f) for f in forms] == sorted(map(len, forms), reverse=True)  # longest first
    assert text == lexicon._text(build(files), built.entries["more"])  # in a fixed order


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[a]\npattern = ['x']\n", "'bad.toml', entry 'a': 'doc' must say what the entry stops"),
        ('[a]\ndoc = "x"\n', "entry 'a': needs exactly one of pattern, verbs, words, map"),
        ('[a]\ndoc = "x"\npattern = []\n', "entry 'a': 'pattern' must be a non-empty list"),
        ('[a]\ndoc = "x"\nwords = [1]\n', "entry 'a': 'words' must be a non-empty list"),
        ("[a]\ndoc = \"x\"\npattern = ['x']\nflags = ['loud']\n", "'flags' must list some of"),
        ("[a]\ndoc = \"x\"\npattern = ['x']\nstops = 'y'\n", "unknown key 'stops'"),
        ('[a]\ndoc = "x"\nwords = ["x"]\nfold = true\n', "apply to a 'pattern' only"),
        ('[a]\ndoc = "x"\nmap = { k = 1 }\n', "'map' must map strings to strings"),
        ("[Bad-Name]\ndoc = \"x\"\npattern = ['x']\n", "entry 'Bad-Name': names are lower-case"),
        ("a = [\n", "'bad.toml' is not valid TOML"),
        ("[[a]]\ndoc = 3\npattern = ['x']\n", "entry 'a[0]': 'doc' must say"),
    ],
)
def test_a_malformed_file_names_the_file_and_the_entry(text: str, message: str) -> None:
    with pytest.raises(LexiconError, match=re.escape(message)):
        parse("bad.toml", text)


LOOP = "[x]\ndoc = \"d\"\npattern = ['${y}']\n[y]\ndoc = \"d\"\npattern = ['${x}']\n"


@pytest.mark.parametrize(
    ("files", "message"),
    [
        (
            {"a.toml": "[x]\ndoc = \"d\"\npattern = ['(']\n"},
            "'a.toml', entry 'x': does not compile",
        ),
        (
            {"a.toml": "[x]\ndoc = \"d\"\npattern = ['${nothing}']\n"},
            "'a.toml', entry 'x': '${nothing}' names no pattern or verbs entry",
        ),
        (
            {"a.toml": LOOP},
            "refers to itself (x -> y -> x)",
        ),
        (
            {
                "a.toml": "[x]\ndoc = \"d\"\npattern = ['a']\n",
                "b.toml": "[x]\ndoc = \"d\"\nwords = ['a']\n",
            },
            "'b.toml', entry 'x': is defined in 'a.toml' too",
        ),
        (
            {"a.toml": "[x]\ndoc = \"d\"\nverbs = ['${x}']\n"},
            "'a.toml', entry 'x': '${x}' names no other verbs entry",
        ),
    ],
)
def test_a_broken_lexicon_names_the_file_and_the_entry(files: dict[str, str], message: str) -> None:
    with pytest.raises(LexiconError, match=re.escape(message)):
        build(files)


def test_a_family_takes_entries_from_several_files() -> None:
    shipped = lexicon.data_files()
    extra = "[[override]]\ndoc = \"A house phrase.\"\npattern = ['\\bsudo mode\\b']\n"
    built = build({**shipped, "override_local.toml": extra})
    family = built.families["override"]
    assert len(family) == len(lexicon.shipped().families["override"]) + 1
    assert family[-1].file == "override_local.toml"
    assert lexicon._compile(built, family[-1]).search("enable sudo mode now")


def test_an_unknown_name_or_a_wrong_kind_names_the_entry() -> None:
    with pytest.raises(KeyError, match="no guard data entry 'nothing'"):
        lexicon.pattern("nothing")
    with pytest.raises(LexiconError, match="'policy_loosen.toml', entry 'loosen': is a pattern"):
        lexicon.words("loosen")
    with pytest.raises(LexiconError, match="'scope.toml', entry 'everyone': is a words entry"):
        lexicon.mapping("everyone")


def _doubling(levels: int) -> dict[str, str]:
    # Each entry inserts the next one twice: the last one's text, 2 ** levels times.
    entries = [
        f"[p{i}]\ndoc = \"d\"\npattern = ['${{p{i + 1}}}${{p{i + 1}}}']\n" for i in range(levels)
    ]
    return {"deep.toml": "".join(entries) + f"[p{levels}]\ndoc = \"d\"\npattern = ['ab']\n"}


def test_references_that_double_at_every_level_are_refused_before_they_grow() -> None:
    # 2 ** 20 copies of "ab" would be a pattern of two million characters, compiled into
    # every guard: a data file that grows its patterns so is refused, naming the entry.
    calls = 0
    text = lexicon._text

    def counted(*args: object, **kwargs: object) -> str:
        nonlocal calls
        calls += 1
        return text(*args, **kwargs)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(lexicon, "_text", counted)
        with pytest.raises(LexiconError, match=r"'deep.toml', entry 'p\d+': .*longer than"):
            build(_doubling(20))
    assert calls < 2 * lexicon.PATTERN_CHARS


def test_a_family_entry_must_be_a_pattern() -> None:
    # A family is compiled when a check first reads it: a words entry there would fail
    # the guard's first screening, long after the file was read.
    with pytest.raises(LexiconError, match="'x.toml', entry 'override\\[0\\]': .*pattern"):
        build({"x.toml": "[[override]]\ndoc = \"d\"\nwords = ['a', 'b']\n"})


@pytest.mark.parametrize("pattern", ["(a+)+$", "(?:\\w+\\s*)*x", "(?:a|b+)*c", "(?:(?:x+)y){2,}"])
def test_a_pattern_that_repeats_a_repeat_is_refused(pattern: str) -> None:
    # An unbounded repeat inside another backtracks over every split of a long run
    # (exponential or polynomial in it): such a pattern is refused when the file is read.
    with pytest.raises(LexiconError, match="'r.toml', entry 'r': .*repeat"):
        build({"r.toml": f"[r]\ndoc = \"d\"\npattern = ['{pattern}']\n"})


@pytest.mark.parametrize("name", ["url", "email"])
def test_a_long_run_of_dotted_labels_is_read_in_bounded_work_per_start(name: str) -> None:
    # Every label repeat of the shipped address patterns is bounded, so a search of
    # "a.a.a..." tries a bounded number of labels from each start (no repeat of a repeat).
    found = lexicon.pattern(name)
    assert lexicon.repeated_repeat(found.pattern, found.flags) is None
    assert found.search("mail x@docs.example.com or see docs.example.com/a") is not None
