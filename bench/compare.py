"""One bench, two commits, side by side in one run: each figure of the bench's `--json` output for both, and their ratio.

Two runs of the same code on this machine differ by more than many changes are worth (docs/benchmarks.md: about
1.5 ms between two hop runs), and the machine drifts over an hour. So the two sides run in one session, alternating
in ABBA order (base, head, head, base, ...), each from its own checkout, and the table gives every run's figure
beside the medians.

    python bench/compare.py search.py --base REV --only '_ms_100k|recall'
    python bench/compare.py pipeline.py --base HEAD~1 --rounds 2 -- --hops-only --repeat 10

The base is a detached `git worktree` of `--base` (removed after); the head is this checkout as it is, uncommitted
changes included, or another worktree with `--head REV`. Both run with this interpreter; each side imports its own
code (checked before its first run). A bench that has `--no-write` is given it, so neither side rewrites the docs;
with --write the table becomes the "compare" section of docs/benchmarks.md (most comparisons are working figures).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common

ROOT = Path(__file__).resolve().parent.parent
# a list item that names itself (a mode, a scale) is keyed by that name rather than its position
_ITEM_NAMES = ("name", "mode", "label", "scale", "key", "id")


@dataclass
class Side:
    label: str
    checkout: Path
    runs: list[dict[str, float]] = field(default_factory=list)


def flatten(obj: object, prefix: str = "") -> Iterator[tuple[str, float]]:
    """Every numeric leaf of a JSON value as (dotted key, value); booleans, strings and nulls are not figures."""
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return
    if isinstance(obj, int | float):
        yield prefix, float(obj)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from flatten(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(obj, list):
        names = [next((str(v[n]) for n in _ITEM_NAMES if isinstance(v, dict) and isinstance(v.get(n), str | int)
                       and not isinstance(v.get(n), bool)), str(i)) for i, v in enumerate(obj)]
        if len(set(names)) < len(names):  # one mode at several latencies: the position keeps them apart
            names = [name if name == str(i) else f"{name}#{i}" for i, name in enumerate(names)]
        for name, v in zip(names, obj):
            yield from flatten(v, f"{prefix}[{name}]")


def parse_json_output(stdout: str) -> dict:
    """The bench's JSON object: the whole stdout, else its last line that parses as an object."""
    try:
        out = json.loads(stdout)
    except json.JSONDecodeError:
        out = None
        for line in reversed(stdout.strip().splitlines()):
            if line.lstrip().startswith("{"):
                try:
                    out = json.loads(line)
                    break
                except json.JSONDecodeError:
                    continue
    if not isinstance(out, dict):
        raise ValueError(f"no JSON object on the bench's stdout (last 300 characters: {stdout[-300:]!r})")
    return out


def bench_command(bench: str, args: list[str], help_text: str) -> list[str]:
    """The bench's argv for one compared run: its own arguments, `--json`, and `--no-write` where it has one."""
    if "--json" not in help_text:
        raise ValueError(f"bench/{bench} has no --json option: its figures cannot be compared")
    extra = [flag for flag in ("--json", "--no-write") if flag in help_text and flag not in args]
    return [sys.executable, f"bench/{bench}", *args, *extra]


def section(bench: str, bench_args: list[str], base: str, head: str, rounds: int, table: str, argv: list[str]) -> str:
    """The "compare" section of docs/benchmarks.md: the command, the two sides and the table."""
    return (f"## Two commits side by side\n\nMeasured {common.today()} with `{common.command_line('compare.py', argv)}`:"
            f" bench/{bench} {' '.join(bench_args)}, {base} against {head}, {rounds} run(s) a side in ABBA order. Two"
            " runs of the same code differ by more than many changes are worth; a figure means something only beside"
            " the base's, measured in the same session.\n\n" + table)


def run_order(rounds: int) -> list[int]:
    """Side indexes (0 base, 1 head) in ABBA order, so a drift over the session falls on both sides alike."""
    return [s for r in range(rounds) for s in ((0, 1) if r % 2 == 0 else (1, 0))]


def compare_rows(base: list[dict[str, float]], head: list[dict[str, float]], only: str | None = None) -> list[dict]:
    """One row per figure either side reported: each run's values, the medians and head / base."""
    keys = list(dict.fromkeys([k for run in base + head for k in run]))
    rows = []
    for key in keys:
        if only and not re.search(only, key):
            continue
        b = [run[key] for run in base if key in run]
        h = [run[key] for run in head if key in run]
        mb = statistics.median(b) if b else None
        mh = statistics.median(h) if h else None
        ratio = round(mh / mb, 3) if mb and mh is not None else None
        rows.append({"figure": key, "base": b, "head": h, "base_median": mb, "head_median": mh, "head_over_base": ratio})
    return rows


def _fmt(v: float | None) -> str:
    return "" if v is None else f"{v:.6g}"


def markdown(rows: list[dict], base: str, head: str) -> str:
    lines = [f"| figure | {base} (median) | {head} (median) | {head} / {base} | {base} runs | {head} runs |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['figure']} | {_fmt(r['base_median'])} | {_fmt(r['head_median'])} | "
                     f"{_fmt(r['head_over_base'])} | {', '.join(map(_fmt, r['base']))} | {', '.join(map(_fmt, r['head']))} |")
    return "\n".join(lines)


def _git(cwd: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"git {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout.strip()


def _label(repo: Path, rev: str | None) -> str:
    if rev is not None:
        return _git(repo, "rev-parse", "--short", f"{rev}^{{commit}}")
    dirty = bool(_git(repo, "status", "--porcelain"))  # untracked files too: a new module is a change
    return _git(repo, "rev-parse", "--short", "HEAD") + ("+changes" if dirty else "")


def _env(checkout: Path) -> dict[str, str]:
    return dict(os.environ) | {"PYTHONPATH": str(checkout)}


def _check_imports(side: Side) -> None:
    """Each side must run its own code: the bench puts its checkout first on the path, workers start from its cwd."""
    proc = subprocess.run([sys.executable, "-c", "import agent, sys; sys.stdout.write(agent.__file__)"],
                          cwd=side.checkout, env=_env(side.checkout), capture_output=True, text=True)
    where = Path(proc.stdout.strip()).resolve()
    if proc.returncode or side.checkout.resolve() not in where.parents:
        raise RuntimeError(f"{side.label}: `agent` imports from {where or proc.stderr.strip()}, not {side.checkout}")


def _command(side: Side, bench: str, args: list[str]) -> list[str]:
    """The side's bench command, found before any run: a bench missing at either side stops the comparison at once."""
    script = side.checkout / "bench" / bench
    if not script.exists():
        raise RuntimeError(f"bench/{bench} does not exist at {side.label}")
    help_text = subprocess.run([sys.executable, str(script), "--help"], cwd=side.checkout, env=_env(side.checkout),
                               capture_output=True, text=True).stdout
    return bench_command(bench, args, help_text)


def _run(side: Side, cmd: list[str], timeout: float | None) -> dict[str, float]:
    print(f"[{side.label}] {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
    # the bench's progress and errors go straight to this terminal; only its stdout (the JSON) is read
    proc = subprocess.run(cmd, cwd=side.checkout, env=_env(side.checkout), stdout=subprocess.PIPE, text=True,
                          timeout=timeout)
    if proc.returncode:
        raise RuntimeError(f"[{side.label}] {cmd[1]} exited {proc.returncode} (its stderr is above)")
    return dict(flatten(parse_json_output(proc.stdout)))


def compare(repo: Path, bench: str, bench_args: list[str], base_rev: str, head_rev: str | None = None,
            rounds: int = 1, timeout: float | None = None) -> tuple[Side, Side]:
    """Run `bench` on both sides of `repo`, alternating; worktrees made here are removed before returning."""
    worktrees: list[Path] = []

    def worktree(rev: str) -> Path:
        path = Path(tempfile.mkdtemp(prefix="finagent-compare-")) / "checkout"
        if (repo.parent / "shared").is_dir():  # the benches read the real data beside the checkout (../shared/data)
            (path.parent / "shared").symlink_to(repo.parent / "shared")
        _git(repo, "worktree", "add", "--detach", str(path), _git(repo, "rev-parse", "--verify", f"{rev}^{{commit}}"))
        worktrees.append(path)
        return path

    base_label, head_label = _label(repo, base_rev), _label(repo, head_rev)
    if base_label == head_label:
        raise ValueError(f"base and head are the same code ({base_label})")
    try:
        base = Side(base_label, worktree(base_rev))
        head = Side(head_label, worktree(head_rev) if head_rev else repo)
        sides = (base, head)
        for side in sides:
            _check_imports(side)
        commands = [_command(side, bench, bench_args) for side in sides]
        for index in run_order(rounds):
            sides[index].runs.append(_run(sides[index], commands[index], timeout))
    finally:
        for path in worktrees:
            subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=repo, capture_output=True)
            shutil.rmtree(path.parent, ignore_errors=True)
    return base, head


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bench", help="a script under bench/, e.g. hops.py")
    parser.add_argument("--base", default="HEAD~1", help="the commit to compare against (default HEAD~1)")
    parser.add_argument("--head", help="the other commit (default: this checkout as it is, uncommitted changes included)")
    parser.add_argument("--rounds", type=int, default=1, help="runs of each side, in ABBA order (default 1)")
    parser.add_argument("--only", help="a regular expression: only the figures whose dotted key it matches")
    parser.add_argument("--timeout", type=float, help="seconds allowed for one bench run")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--write", action="store_true", help="write the table as the docs' \"compare\" section")
    parser.epilog = "Everything after -- is the bench's own arguments."
    argv = sys.argv[1:] if argv is None else argv
    cut = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:cut])
    args.bench_args = argv[cut + 1:]
    bench = args.bench.removeprefix("bench/")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    try:
        if args.only:
            re.compile(args.only)
        base, head = compare(ROOT, bench, args.bench_args, args.base, args.head, args.rounds, args.timeout)
    except (ValueError, RuntimeError, re.error, subprocess.TimeoutExpired) as exc:
        print(f"compare: {exc}", file=sys.stderr)
        return 2

    rows = compare_rows(base.runs, head.runs, args.only)
    if args.write:
        common.write_section("compare", section(bench, args.bench_args, base.label, head.label, args.rounds,
                                                markdown(rows, base.label, head.label), argv))
    if args.json:
        print(json.dumps({"bench": bench, "bench_args": args.bench_args, "rounds": args.rounds,
                          "order": ["base" if i == 0 else "head" for i in run_order(args.rounds)],
                          "base": base.label, "head": head.label, "figures": rows}))
    else:
        print(f"bench/{bench} {' '.join(args.bench_args)}: {base.label} against {head.label}, "
              f"{args.rounds} run(s) a side, ABBA order\n")
        print(markdown(rows, base.label, head.label))
    return 0


if __name__ == "__main__":
    sys.exit(main())
