"""bench/search.py's pure parts: the headline over sizes, the growth plot and the 1M targets."""
from bench import common, search


def _result(labels):
    out = {"sizes": labels}
    for i, label in enumerate(labels):
        out |= {f"chunks_{label}": 10 ** (4 + i), f"p50_ms_{label}": 5.0 + i, f"p95_ms_{label}": 9.0 + i,
                f"filtered_p50_ms_{label}": 3.0, f"filtered_p95_ms_{label}": 4.0 + i, f"hnsw_build_s_{label}": 4.0 * 10 ** i,
                f"search_working_set_mb_{label}": 30.0 * 10 ** i, f"filtered_recall_at_15_{label}": 1.0,
                f"unfiltered_recall_at_15_{label}": 0.99 - 0.02 * i, f"rare_term_keyword_side_recall_at_15_{label}": 1.0,
                f"rare_term_hybrid_recall_at_15_{label}": 1.0 - 0.05 * i,
                f"bulk_load_chunks_per_s_{label}": 5000.0}
    return out


def test_headline_takes_the_worst_recall_over_the_sizes():
    out = search.headline(_result(["10k", "100k", "1m"]), ["10k", "100k", "1m"])
    assert out["unfiltered_recall_at_15"] == 0.95 and out["filtered_recall_at_15"] == 1.0
    assert out["rare_term_hybrid_recall_at_15"] == 0.9
    checks = {c["metric"]: c["status"] for c in common.check_targets(out, search.TARGETS)}
    assert checks["rare_term_hybrid_recall_at_15"] == "FAIL"  # a rare term's chunk must reach the top 15 at every size


def test_growth_plot_is_a_png():
    png = search.growth_plot(_result(["10k", "100k", "1m"]))
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_the_1m_targets_fail_when_a_figure_misses():
    result = _result(["10k", "100k", "1m"]) | {"p95_ms_1m": 31.0, "unfiltered_recall_at_15_1m": 0.94}
    checks = {c["metric"]: c["status"] for c in common.check_targets(result, search.TARGETS_1M)}
    assert checks["p95_ms_1m"] == "FAIL" and checks["filtered_p95_ms_1m"] == "PASS"
    assert checks["unfiltered_recall_at_15_1m"] == "FAIL" and checks["filtered_recall_at_15_1m"] == "PASS"


def test_the_docs_command_hides_this_machines_data_dir():
    assert common.portable_args(["--json", "--data-dir", "scratch/x", "--reuse"]) == ["--json", "--data-dir", "DIR", "--reuse"]
    assert common.portable_args(["--data-dir=/srv/y", "--scale", "1m"]) == ["--data-dir=DIR", "--scale", "1m"]


def test_the_docs_command_hides_a_servers_address():
    args = ["--database-url", "postgresql://u:secret@db:5432/x", "--chunks", "10"]
    assert common.portable_args(args) == ["--database-url", "URL", "--chunks", "10"]
    assert common.portable_args(["--database-url=postgresql://db/x"]) == ["--database-url=URL"]


def test_a_hit_is_outside_a_filter_by_its_companies_only_when_the_filter_names_any():
    from types import SimpleNamespace as Hit

    from agent.models.corpus import Period, SearchFilters

    q4 = [Period(fiscal_year=2023, fiscal_quarter=4)]
    hits = [Hit(ticker="A", fiscal_year=2023, fiscal_quarter=4), Hit(ticker="B", fiscal_year=2023, fiscal_quarter=3)]
    assert search.outside(hits, SearchFilters(tickers=["A"], periods=q4)) == 1
    assert search.outside(hits, SearchFilters(tickers=["B"], periods=q4)) == 2
    assert search.outside(hits, SearchFilters(periods=q4)) == 1  # every company: only the period counts
