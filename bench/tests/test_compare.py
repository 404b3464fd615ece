"""bench/compare.py: one bench on two commits, each side running its own code, figures paired by key."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import compare


def test_flatten_keeps_numeric_leaves_and_names_list_items_by_their_own_name():
    out = dict(compare.flatten({"hop_ms": 9.2, "ok": True, "note": "x", "none": None,
                                "modes": [{"mode": "direct", "wall_s": 4.1}, {"mode": "deep_search", "wall_s": 4.0}],
                                "walls_s": [1, 2], "by": {"a -> b": {"median_ms": 3}}}))
    assert out == {"hop_ms": 9.2, "modes[direct].wall_s": 4.1, "modes[deep_search].wall_s": 4.0,
                   "walls_s[0]": 1.0, "walls_s[1]": 2.0, "by.a -> b.median_ms": 3.0}


def test_list_items_sharing_a_name_keep_their_position():
    out = dict(compare.flatten({"grid": [{"mode": "direct", "latency_s": 0.3}, {"mode": "direct", "latency_s": 1}]}))
    assert out == {"grid[direct#0].latency_s": 0.3, "grid[direct#1].latency_s": 1.0}


def test_parse_json_output_takes_the_whole_stdout_or_its_last_object_line():
    assert compare.parse_json_output('{"a": 1}\n') == {"a": 1}
    assert compare.parse_json_output('warming up\n{"a": 1}\nnot json {\n{"b": 2}\n') == {"b": 2}
    with pytest.raises(ValueError, match="no JSON object"):
        compare.parse_json_output("hop median 9 ms\n[1, 2]\n")


def test_bench_command_adds_json_and_no_write_only_where_the_bench_has_them():
    assert compare.bench_command("pipeline.py", ["--repeat", "5"], "usage: [--json] [--repeat N]")[1:] == \
        ["bench/pipeline.py", "--repeat", "5", "--json"]
    assert compare.bench_command("search.py", ["--json"], "[--json] [--no-write]")[1:] == \
        ["bench/search.py", "--json", "--no-write"]
    with pytest.raises(ValueError, match="no --json"):
        compare.bench_command("batch_old.py", [], "usage: [--quick]")


def test_runs_alternate_abba_so_a_drift_falls_on_both_sides():
    assert compare.run_order(1) == [0, 1]
    assert compare.run_order(3) == [0, 1, 1, 0, 0, 1]


def test_rows_pair_figures_by_key_with_medians_and_ratio():
    rows = compare.compare_rows([{"hop_ms": 10.0, "old_only": 1.0}, {"hop_ms": 12.0}],
                                [{"hop_ms": 9.0, "new_only": 2.0}, {"hop_ms": 8.0}])
    by = {r["figure"]: r for r in rows}
    assert by["hop_ms"]["base_median"] == 11.0 and by["hop_ms"]["head_median"] == 8.5
    assert by["hop_ms"]["head_over_base"] == round(8.5 / 11.0, 3)
    assert by["old_only"]["head"] == [] and by["old_only"]["head_over_base"] is None
    assert by["new_only"]["base"] == [] and by["new_only"]["head_median"] == 2.0
    assert [r["figure"] for r in compare.compare_rows([{"a": 1.0, "b": 2.0}], [{"a": 1.0}], only="^b")] == ["b"]
    table = compare.markdown(rows, "abc", "def")
    assert table.splitlines()[2].startswith("| hop_ms | 11 | 8.5 | 0.773 | 10, 12 | 9, 8 |")


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                          capture_output=True, text=True).stdout.strip()


def _commit(repo: Path, version: int) -> None:
    # the bench reports the version its checkout's code holds, read the way our benches import it
    (repo / "agent").mkdir(exist_ok=True)
    (repo / "agent" / "__init__.py").write_text(f"VERSION = {version}\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", f"v{version}")


@pytest.fixture
def toy_repo(tmp_path) -> Path:
    repo = tmp_path / "repo"
    (tmp_path / "shared" / "data").mkdir(parents=True)
    (tmp_path / "shared" / "data" / "x.txt").write_text("12345")
    (repo / "bench").mkdir(parents=True)
    (repo / "bench" / "toy.py").write_text(
        "import argparse, json, sys\n"
        "from pathlib import Path\n"
        "sys.path.insert(0, str(Path(__file__).resolve().parents[1]))\n"
        "import agent\n"
        "p = argparse.ArgumentParser(); p.add_argument('--json', action='store_true')\n"
        "p.add_argument('--no-write', action='store_true'); p.add_argument('--scale', type=float, default=1)\n"
        "a = p.parse_args()\n"
        "assert a.json and a.no_write, 'compare passes --json and --no-write'\n"
        "print('starting')\n"
        "data = Path(__file__).resolve().parents[2] / 'shared' / 'data' / 'x.txt'\n"
        "print(json.dumps({'version': agent.VERSION * a.scale, 'modes': [{'mode': 'x', 'n': 3}],\n"
        "                  'data_chars': len(data.read_text())}))\n")
    (repo / ".gitignore").write_text("__pycache__/\n")
    _git(repo, "init", "-q")
    _commit(repo, 1)
    _commit(repo, 2)
    return repo


def test_each_side_runs_its_own_commit_and_worktrees_are_removed(toy_repo):
    base, head = compare.compare(toy_repo, "toy.py", ["--scale", "10"], "HEAD~1", rounds=2)
    assert [r["version"] for r in base.runs] == [10.0, 10.0]
    assert [r["version"] for r in head.runs] == [20.0, 20.0]
    assert head.checkout == toy_repo and base.label != head.label
    # both sides read the data beside the repository, as the benches read ../shared/data
    assert [r["data_chars"] for r in base.runs + head.runs] == [5.0] * 4
    assert not base.checkout.exists()
    assert _git(toy_repo, "worktree", "list").count("\n") == 0  # only the main checkout is left


def test_uncommitted_changes_are_the_head_and_are_labelled_so(toy_repo):
    (toy_repo / "agent" / "__init__.py").write_text("VERSION = 5\n")
    base, head = compare.compare(toy_repo, "toy.py", [], "HEAD")
    assert head.label.endswith("+changes") and base.runs[0]["version"] == 2.0 and head.runs[0]["version"] == 5.0
    _git(toy_repo, "checkout", "-q", "--", ".")
    (toy_repo / "agent" / "new_module.py").write_text("")  # untracked, and still a change
    assert compare.compare(toy_repo, "toy.py", [], "HEAD")[1].label.endswith("+changes")


def test_the_same_code_twice_a_missing_bench_and_a_failing_bench_say_so(toy_repo):
    with pytest.raises(ValueError, match="same code"):
        compare.compare(toy_repo, "toy.py", [], "HEAD")
    with pytest.raises(RuntimeError, match="does not exist"):
        compare.compare(toy_repo, "missing.py", [], "HEAD~1")
    with pytest.raises(RuntimeError, match="exited"):
        compare.compare(toy_repo, "toy.py", ["--scale", "not-a-number"], "HEAD~1")
    assert _git(toy_repo, "worktree", "list").count("\n") == 0


def test_the_command_line_prints_the_side_by_side_table(toy_repo, monkeypatch, capsys):
    monkeypatch.setattr(compare, "ROOT", toy_repo)
    assert compare.main(["toy.py", "--base", "HEAD~1", "--json", "--", "--scale", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["order"] == ["base", "head"]
    assert {r["figure"]: r["head_over_base"] for r in out["figures"]} == \
        {"version": 2.0, "modes[x].n": 1.0, "data_chars": 1.0}
    assert compare.main(["toy.py", "--base", "HEAD"]) == 2
    assert "same code" in capsys.readouterr().err


def test_the_script_runs_from_the_command_line():
    proc = subprocess.run([sys.executable, "bench/compare.py", "--help"], cwd=compare.ROOT, capture_output=True,
                          text=True)
    assert proc.returncode == 0 and "ABBA" in proc.stdout
