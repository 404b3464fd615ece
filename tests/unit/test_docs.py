"""The docs say what the code is: every link, path, command, option, setting and metric they name exists, the README
stays a short front door, and docs/quality.md keeps the sections its eval commands rewrite."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
# the pages written for readers here; docs/benchmarks.md is written by the benches and only its links are checked
READER_PAGES = [README] + [DOCS / f"{name}.md" for name in ("services", "operators", "analysts", "architecture", "quality")]
ALL_PAGES = [README, *sorted(DOCS.glob("*.md"))]

TOP_DIRS = ("agent", "tasks", "workers", "api_stub", "ops", "tests", "bench", "clients", "docs")
PATH_RE = re.compile(rf"(?<![\w./<>-])(?:\./)?((?:{'|'.join(TOP_DIRS)})/[\w./*-]*[\w*/])")
LINK_RE = re.compile(r"\]\(([^)\s]+)\)")
# settings that are not an operator's to set: test and benchmark hooks (llm_script_path, llm_latency_s, fanout), the
# CPU the local launcher gives each process (worker_cpu), a deprecated alias named in LLM_JSON_MODE's row
# (llm_json_schema), and default_mode, which no code reads
INTERNAL_SETTINGS = {"llm_script_path", "llm_latency_s", "fanout", "worker_cpu", "llm_json_schema", "default_mode"}


def _text(page: Path) -> str:
    return page.read_text(encoding="utf-8")


def _code(text: str) -> list[str]:
    """The inline code spans and the lines of fenced blocks: where commands and paths are written."""
    spans = re.findall(r"(?<!`)`([^`\n]+)`(?!`)", re.sub(r"```.*?```", "", text, flags=re.DOTALL))
    blocks = [line for block in re.findall(r"```[^\n]*\n(.*?)```", text, flags=re.DOTALL) for line in block.splitlines()]
    return spans + blocks


def test_the_pages_exist():
    missing = [p.relative_to(ROOT).as_posix() for p in READER_PAGES if not p.is_file()]
    assert not missing, f"missing pages: {missing}"


def test_the_readme_is_a_front_door():
    text = _text(README)
    assert len(text.splitlines()) <= 200, f"README.md has {len(text.splitlines())} lines; at most 200"
    for command in ("./ops/demo.sh", "./ops/test.sh", "pip install ./clients/python", "finagent.v1.submit_research",
                    "finagent batch run", "finagent services start", "finagent worker --queues"):
        assert command in text, f"the README shows no `{command}`"
    for page in ("docs/services.md", "docs/operators.md", "docs/analysts.md", "docs/architecture.md", "docs/quality.md",
                 "docs/benchmarks.md"):
        assert f"]({page})" in text, f"the README does not link {page}"


def test_the_readme_holds_no_measured_figures():
    """Each figure has one home, written by what measures it: docs/benchmarks.md or docs/quality.md."""
    text = _text(README)
    figures = re.findall(r"\b\d+(?:[.,]\d+)?\s?(?:ms|µs|s|x|%|MB|GB|jobs/min|chunks/s)(?![\w/])", text)
    dates = re.findall(r"\b20\d\d-\d\d-\d\d\b", text)
    assert not figures and not dates, f"measured figures in README.md: {figures + dates}"


@pytest.mark.parametrize("page", ALL_PAGES, ids=lambda p: p.name)
def test_every_relative_link_resolves(page):
    broken = []
    for target in LINK_RE.findall(_text(page)):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        if not (page.parent / target.split("#")[0]).exists():
            broken.append(target)
    assert not broken, f"{page.name} links to files that do not exist: {broken}"


@pytest.mark.parametrize("page", READER_PAGES, ids=lambda p: p.name)
def test_every_named_path_exists(page):
    missing = []
    for path in sorted(set(PATH_RE.findall(_text(page)))):
        if "{" in path:
            continue
        found = list(ROOT.glob(path.rstrip("/"))) if "*" in path else [ROOT / path]
        if not any(p.exists() for p in found):
            missing.append(path)
    assert not missing, f"{page.name} names paths that do not exist: {missing}"


def test_the_path_check_can_fail():
    assert PATH_RE.findall("see `ops/cli/main.py` and tasks/no_such_module.py") == ["ops/cli/main.py", "tasks/no_such_module.py"]
    assert not (ROOT / "tasks/no_such_module.py").exists()


def _cli():
    """The `finagent` command as Typer builds it (its click objects are Typer's own: duck-typed here)."""
    from ops.cli.main import app

    return typer.main.get_command(app)


def _is_group(command) -> bool:
    return hasattr(command, "list_commands")


def _subcommands(command) -> list[str]:
    return command.list_commands(command.context_class(command))


def _subcommand(command, name: str):
    return command.get_command(command.context_class(command), name)


def _invocations(text: str) -> list[list[str]]:
    """Every `finagent ...` command line written in code, split into words, without comments or placeholders."""
    found = []
    for code in _code(text):
        for part in re.split(r"&&|\|\||;|\|(?=\s)", code.split("  #")[0]):
            words = part.split()
            if words[:1] != ["finagent"]:
                continue
            try:
                words = shlex.split(part)
            except ValueError:
                pass
            found.append([w.strip("[]") for w in words[1:]])
    return found


def _resolve(group, words: list[str]):
    """The command the words name, and the options given to it; AssertionError when a word names no command."""
    command, rest = group, list(words)
    while _is_group(command) and rest and re.fullmatch(r"[a-z][a-z0-9-]*", rest[0]):  # not an option or a placeholder
        name = rest.pop(0)
        sub = _subcommand(command, name)
        assert sub is not None, f"`finagent {' '.join(words)}`: no command {name!r} (known: {_subcommands(command)})"
        command = sub
    return command, [w for w in rest if w.startswith("--")]


def _options_of(command) -> set[str]:
    names = {"--help"}
    for param in command.params:
        names |= set(getattr(param, "opts", [])) | set(getattr(param, "secondary_opts", []))
    return names


@pytest.mark.parametrize("page", READER_PAGES, ids=lambda p: p.name)
def test_every_documented_command_and_option_exists(page):
    group = _cli()
    invocations = _invocations(_text(page))
    for words in invocations:
        command, options = _resolve(group, words)
        known = _options_of(command)
        for option in options:
            for name in option.split("=")[0].split("/"):
                assert name in known, f"`finagent {' '.join(words)}` in {page.name}: {command.name} has no option {name}"


def test_the_command_check_can_fail():
    group = _cli()
    assert _invocations("run `finagent batch run FILE --out x` then\n```bash\nfinagent jobs show ID --ledger  # comment\n```\n") == [
        ["batch", "run", "FILE", "--out", "x"], ["jobs", "show", "ID", "--ledger"]]
    with pytest.raises(AssertionError):
        _resolve(group, ["no-such-command"])
    command, options = _resolve(group, ["batch", "run", "FILE", "--no-such-option"])
    assert "--no-such-option" in options and "--no-such-option" not in _options_of(command)


def test_the_pages_document_every_command():
    group = _cli()
    documented = {" ".join(w for w in words if not w.startswith("-"))
                  for page in READER_PAGES for words in _invocations(_text(page))}
    for name in _subcommands(group):
        sub = _subcommand(group, name)
        for leaf in (_subcommands(sub) if _is_group(sub) else [""]):
            wanted = f"{name} {leaf}".strip()
            assert any(d == wanted or d.startswith(wanted + " ") for d in documented), f"`finagent {wanted}` is in no page"


def test_operators_md_lists_every_metric():
    defined = set(re.findall(r'"(finagent_[a-z_]+)"', _text(ROOT / "agent/infra/metrics.py")))
    assert len(defined) >= 15
    page = _text(DOCS / "operators.md")
    # counters are exported (and documented) with the `_total` suffix prometheus-client adds to the defined name
    documented = {re.sub(r"_total$", "", m) for m in re.findall(r"`(finagent_[a-z_]+)`", page)}
    assert not defined - documented, f"metrics missing from docs/operators.md: {sorted(defined - documented)}"
    assert not documented - defined, f"docs/operators.md names metrics the code does not define: {sorted(documented - defined)}"


def _documented_settings() -> set[str]:
    """The settings in the first column of docs/operators.md's tables: `A` / `B`, `NESTED__X/Y/Z` counts as NESTED."""
    names = set()
    for row in re.findall(r"^\| (`[A-Z][A-Z0-9_/]*`(?: / `[A-Z][A-Z0-9_/]*`)*) \|", _text(DOCS / "operators.md"), re.MULTILINE):
        for name in re.findall(r"`([A-Z][A-Z0-9_/]*)`", row):
            names.add(name.split("__")[0].lower())
    return names


def test_operators_md_documents_every_setting_and_only_settings():
    from agent.settings import Settings

    fields = set(Settings.model_fields)
    documented = _documented_settings()
    assert len(documented) >= 50
    assert not documented - fields, f"docs/operators.md documents settings agent/settings.py lacks: {sorted(documented - fields)}"
    undocumented = fields - documented - INTERNAL_SETTINGS
    assert not undocumented, f"settings missing from docs/operators.md: {sorted(undocumented)}"
    assert INTERNAL_SETTINGS <= fields, f"internal settings that no longer exist: {sorted(INTERNAL_SETTINGS - fields)}"


def test_quality_md_keeps_the_sections_the_eval_commands_write():
    headings = set()
    for source in (ROOT / "ops").rglob("*.py"):
        text = source.read_text()
        if "write_section(" in text:
            headings |= set(re.findall(r'"(## [^"\n]+)"', text))
    assert len(headings) >= 3, f"found only {sorted(headings)}"
    quality = _text(DOCS / "quality.md").splitlines()
    missing = sorted(h for h in headings if h not in quality)
    assert not missing, f"docs/quality.md lost the sections its eval commands replace: {missing}"


def test_the_extras_operators_md_names_exist():
    import tomllib

    extras = set(tomllib.loads(_text(ROOT / "pyproject.toml"))["project"]["optional-dependencies"])
    page = _text(DOCS / "operators.md")
    named = set(re.findall(r"^\| `([a-z][a-z-]*)` \|", page[page.index("## Installing"):page.index("## Where the servers are")], re.MULTILINE))
    assert len(named) >= 4
    assert not named - extras, f"docs/operators.md names extras pyproject.toml lacks: {sorted(named - extras)}"
    assert {"local", "embedded"} <= named
