"""Two versions of the search side by side in one process, on a corpus kept by bench/search.py.

    .venv/bin/python bench/search.py --scale 1m --data-dir DIR      # builds and keeps the corpus (a long run)
    .venv/bin/python bench/search_ab.py --data-dir DIR --base REV [--rounds 3] [--json]

`bench/compare.py` runs a bench once per checkout, and each run of bench/search.py builds its own corpus: at a million
chunks that is most of an hour a side. Here `agent/retrieval/hybrid.py` and `agent/retrieval/keyword_index.py` of
REV are loaded beside the working tree's as modules of their own, and both search the same kept corpus from the same
stack. The bench's queries run through each side's `hybrid_search`, unfiltered and filtered, a pass at a time in
ABBA order (base, head, head, base, ...) after a warm pass each. Reported per side: p50 and p95 of every pass and of
all of them, the CPU time the Postgres server's processes spent per search, and how many top-15 lists are identical
between the sides. Prints a markdown table (or one JSON object); docs/benchmarks.md is not written.
"""
from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path
from unittest import mock

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common, kept_corpus, search

ROOT = Path(__file__).resolve().parent.parent
SEARCH_MODULES = ("agent/retrieval/keyword_index.py", "agent/retrieval/hybrid.py")  # in load order


def module_at(rev: str, path: str, name: str) -> types.ModuleType:
    """The file at `rev` executed as a new module `name` (registered, so pydantic can resolve its annotations)."""
    source = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    module = types.ModuleType(name)
    module.__file__ = f"{rev}:{path}"
    sys.modules[name] = module
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module


def base_search(rev: str):
    """REV's `hybrid_search`, reading BM25 through REV's keyword_index."""
    keyword_index = module_at(rev, SEARCH_MODULES[0], "finagent_base_keyword_index")
    hybrid = module_at(rev, SEARCH_MODULES[1], "finagent_base_hybrid")
    hybrid.__dict__["keyword_index"] = keyword_index
    return hybrid.hybrid_search


def postgres_pids(data_dir: Path) -> list[int]:
    """The kept stack's postmaster and its backends: not another Postgres on the machine (a corpus being built)."""
    return common.process_tree(common.postmaster_pids(data_dir))


def order(rounds: int) -> list[str]:
    """ABBA: base, head, head, base, ... `rounds` passes a side."""
    return [side for r in range(rounds) for side in (("base", "head") if r % 2 == 0 else ("head", "base"))]


def summary(passes: list[dict], ids: dict[str, dict[str, list]]) -> dict:
    """Per side and kind: every pass's p50/p95, the pooled p50/p95, the server's CPU ms per search; and the lists
    identical between the sides."""
    out: dict = {}
    for side in ("base", "head"):
        for kind in ("unfiltered", "filtered"):
            mine = [p for p in passes if p["side"] == side and p["kind"] == kind]
            times = [t for p in mine for t in p["times"]]
            out[f"{side}_{kind}"] = {
                "p50_ms": round(common.percentile(times, 50), 2), "p95_ms": round(common.percentile(times, 95), 2),
                "passes_p50_ms": [round(common.percentile(p["times"], 50), 2) for p in mine],
                "passes_p95_ms": [round(common.percentile(p["times"], 95), 2) for p in mine],
                "server_cpu_ms_per_search": round(1000 * sum(p["server_cpu_s"] for p in mine) / max(1, len(times)), 2)}
    for kind in ("unfiltered", "filtered"):
        pairs = list(zip(ids["base"][kind], ids["head"][kind]))
        out[f"identical_{kind}"] = f"{sum(a == b for a, b in pairs)}/{len(pairs)}"
    return out


def markdown(result: dict) -> str:
    rows = [(kind, side, r["p50_ms"], r["p95_ms"], ", ".join(map(str, r["passes_p50_ms"])), r["server_cpu_ms_per_search"])
            for kind in ("unfiltered", "filtered") for side in ("base", "head") for r in [result["summary"][f"{side}_{kind}"]]]
    table = common.markdown_table(rows, ("search", "side", "p50 (ms)", "p95 (ms)", "passes p50 (ms)", "server CPU ms / search"))
    return "\n".join([f"{result['chunks']} chunks, base {result['base']} against the working tree, {result['rounds']} passes a side",
                      "", table, "", f"identical top 15: unfiltered {result['summary']['identical_unfiltered']}, "
                                     f"filtered {result['summary']['identical_filtered']}"])


def run(ctx, args, say) -> dict:
    from agent.retrieval import hybrid

    chunks, queries, vecs = kept_corpus.queries(ctx, args, say)
    filters = search.make_filters(search.full_tickers(ctx), len(queries))
    sides = {"base": base_search(args.base), "head": hybrid.hybrid_search}
    kinds = {"unfiltered": None, "filtered": filters}
    ids: dict[str, dict[str, list]] = {"base": {}, "head": {}}
    passes = []
    for warm in (True, False):
        for side in ("base", "head") if warm else order(args.rounds):
            for kind, f in kinds.items():
                with mock.patch.object(hybrid, "hybrid_search", sides[side]):  # run_pass imports it from there
                    pids = postgres_pids(Path(args.data_dir))  # each pass: the pool may have opened connections since the last
                    cpu = common.cpu_seconds(pids)
                    times, ids[side][kind], _ = search.run_pass(ctx, queries, vecs, f, None)
                    cpu = common.cpu_seconds(pids) - cpu
                if not warm:
                    passes.append({"side": side, "kind": kind, "times": times, "server_cpu_s": cpu})
                    say(f"{side} {kind}: p50 {common.percentile(times, 50):.2f} ms, p95 {common.percentile(times, 95):.2f} ms")
    return {"chunks": chunks, "queries": len(queries), "base": args.base, "rounds": args.rounds,
            "summary": summary(passes, ids), **common.machine()}


def main(argv: list[str] | None = None) -> int:
    p = kept_corpus.parser(__doc__)
    p.add_argument("--base", required=True, help="the git revision to measure the working tree against")
    p.add_argument("--rounds", type=int, default=3, help="passes a side (each unfiltered and filtered)")
    return kept_corpus.main(kept_corpus.parse(p, argv), "search_ab", run, markdown)


if __name__ == "__main__":
    sys.exit(main())
