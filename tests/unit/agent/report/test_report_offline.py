"""The morning report of a batch run on the offline provider: it uses no model, so its tokens and cost are not
applicable, not zero; a batch with some jobs on a model keeps its figures."""
from __future__ import annotations

from pathlib import Path

from agent.models.batch import BatchReport
from agent.report.morning import write_report
from agent.report.stats import mode_stats, totals, used_a_model
from agent.settings import Settings
from tests.support.report_fixtures import sample_batch

SETTINGS = Settings(_env_file=None)


def _offline(report: BatchReport, keep_model_for: set[int] = frozenset()) -> BatchReport:  # type: ignore[assignment]
    items = [i.model_copy(update={"result": i.result.model_copy(update={"provider": "extractive", "tokens": {}, "cost_usd": 0.0})})
             if i.result is not None and i.line not in keep_model_for else i for i in report.items]
    return report.model_copy(update={"items": items})


def _md_section(md: str, title: str) -> str:
    return md.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_offline_totals_say_not_applicable(tmp_path: Path) -> None:
    report = _offline(sample_batch())
    t = totals(report, mode_stats(report, SETTINGS))
    assert not t.tokens_apply and not any(used_a_model(i) for i in report.items)
    _, md_path = write_report(report, tmp_path / "night.html", SETTINGS)
    md = md_path.read_text()
    totals_md = _md_section(md, "Totals")
    for name in ("Prompt tokens", "Completion tokens", "Cost"):
        assert f"| {name} | not applicable (the offline provider uses no model) |" in totals_md
    assert "$0.0000" not in md and "| 0 / 0 |" not in md
    assert md.count("| not applicable | not applicable |") == 7  # the seven lines with a result: tokens, then cost


def test_a_batch_partly_on_a_model_keeps_its_figures(tmp_path: Path) -> None:
    report = _offline(sample_batch(), keep_model_for={1})  # line 1: 1,000 / 100 tokens, $0.002
    t = totals(report, mode_stats(report, SETTINGS))
    assert t.tokens_apply and (t.prompt_tokens, t.completion_tokens) == (1000, 100)
    _, md_path = write_report(report, tmp_path / "night.html", SETTINGS)
    totals_md = _md_section(md_path.read_text(), "Totals")
    assert "| Prompt tokens | 1,000 |" in totals_md and "| Cost | $0.0020 |" in totals_md
