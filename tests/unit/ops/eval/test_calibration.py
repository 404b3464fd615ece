"""The calibration tables on made-up records: bins, ECE, separation, iterations and early termination per mode."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ops.eval.calibration import (
    EvalRecord,
    RecordsFileError,
    auroc,
    early_terminated,
    load_records,
    mode_rows,
    overall_early_rate,
    reliability,
    wrong_vs_threshold,
)


def _rec(i: int, confidence: float | None, correct: bool | None, mode: str = "standard", iterations: int = 1,
         early: bool | None = True, source: str = "financebench") -> EvalRecord:
    return EvalRecord(id=str(i), source=source, mode=mode, confidence=confidence, correct=correct, iterations=iterations,
                      early_terminated=early, status="completed")


def test_reliability_bins_correctness_by_confidence():
    records = [_rec(1, 0.1, False), _rec(2, 0.15, False), _rec(3, 0.5, True), _rec(4, 0.55, False), _rec(5, 0.95, True),
               _rec(6, 1.0, True), _rec(7, 0.9, None), _rec(8, None, True),
               EvalRecord(id="9", source="x", status="failed", confidence=0.0, correct=False)]
    rel = reliability(records, n_bins=5)
    assert (rel.scored, rel.unscored) == (6, 3)  # no verdict, no confidence, no completed job
    assert [b.questions for b in rel.bins] == [2, 0, 2, 0, 2]  # a confidence of 1.0 falls in the top bin
    assert [b.accuracy for b in rel.bins] == [0.0, None, 0.5, None, 1.0]
    assert rel.bins[4].mean_confidence == pytest.approx(0.975)
    # ECE: (2*|0-0.125| + 2*|0.5-0.525| + 2*|1-0.975|) / 6
    assert rel.ece == pytest.approx((0.25 + 0.05 + 0.05) / 6)
    assert rel.auroc == pytest.approx(8 / 9)  # of the 9 (right, wrong) pairs only (0.5, 0.55) is ordered the wrong way
    assert rel.mean_confidence_correct > rel.mean_confidence_wrong


def test_auroc_is_a_half_when_confidence_says_nothing():
    assert auroc([0.99, 0.99], [0.99, 0.99]) == 0.5
    assert auroc([0.2], [0.8]) == 0.0
    assert auroc([], [0.5]) is None


def test_iterations_and_early_termination_per_mode_beside_the_design():
    # the records' own early flags disagree with the rule on purpose: one rule (fewer iterations than the mode allows) wins
    records = [_rec(1, 0.9, True, "direct", 1, False), _rec(2, 0.9, True, "direct", 2, True),
               _rec(3, 0.9, True, "standard", 3, True), _rec(4, 0.5, False, "deep_search", 4, False),
               _rec(5, 0.5, False, "custom", 1), EvalRecord(id="6", source="x", mode=None, iterations=0, correct=False)]
    limits = {"direct": 2, "standard": 3, "detailed": 4, "deep_search": 10}
    rows = mode_rows(records, {"direct": 1.3, "standard": 2.1, "detailed": 2.8}, limits)
    assert [(r.mode, r.completed, r.avg_iterations, r.early_rate, r.design_avg_iterations) for r in rows] == [
        ("direct", 2, 1.5, 0.5, 1.3), ("standard", 1, 3.0, 0.0, 2.1), ("custom", 1, 1.0, None, None),
        ("deep_search", 1, 4.0, 1.0, None)]
    assert overall_early_rate(rows) == 0.5  # 2 of the 4 jobs whose mode has a limit


def test_early_termination_is_for_completed_jobs_below_their_mode_limit():
    assert early_terminated("completed", 1, 3) is True
    assert early_terminated("completed", 3, 3) is False
    assert early_terminated("failed", 1, 3) is None
    assert early_terminated("completed", 1, None) is None


def test_a_bad_records_file_names_its_line(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({"id": "a", "source": "x"}) + "\n" + json.dumps({"source": "x"}) + "\n")
    with pytest.raises(RecordsFileError, match=r"r.jsonl line 2: id: Field required"):
        load_records(path)
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(RecordsFileError, match="not UTF-8"):
        load_records(path)


def test_the_command_reads_every_records_file_and_draws_the_plot(tmp_path, monkeypatch):
    from agent.settings import get_settings
    from ops.cli.main import app

    monkeypatch.setenv("FINAGENT_DATA_DIR", str(tmp_path))
    get_settings.cache_clear()
    (tmp_path / "eval").mkdir()
    fb = [_rec(i, 0.2 + 0.1 * i, i % 2 == 0) for i in range(6)]
    facts = [_rec(10 + i, 0.9, True, "direct", 1, True, "transcripts") for i in range(3)]
    for name, recs in (("financebench-answers.jsonl", fb), ("transcripts-answers.jsonl", facts)):
        (tmp_path / "eval" / name).write_text("".join(r.model_dump_json() + "\n" for r in recs))
    try:
        result = CliRunner().invoke(app, ["eval", "calibration", "--json"])
        assert result.exit_code == 0, result.output
        out = json.loads(result.stdout)
        assert out["records"] == 9 and out["sources"] == "financebench 6, transcripts 3"
        assert sum(b["questions"] for b in out["reliability"]["bins"]) == 9
        assert (tmp_path / "eval" / "calibration.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        missing = CliRunner().invoke(app, ["eval", "calibration", "--records", str(tmp_path / "nope.jsonl")])
        assert missing.exit_code == 2 and "no such records file" in missing.output
    finally:
        get_settings.cache_clear()


def test_no_records_is_one_readable_line(tmp_path, monkeypatch):
    from agent.settings import get_settings
    from ops.cli.main import app

    monkeypatch.setenv("FINAGENT_DATA_DIR", str(tmp_path))
    get_settings.cache_clear()
    try:
        result = CliRunner().invoke(app, ["eval", "calibration"])
        assert result.exit_code == 2 and "no records under" in result.output
    finally:
        get_settings.cache_clear()


def test_wrong_answers_are_measured_against_their_modes_threshold():
    thresholds = {"direct": 0.7, "standard": 0.8}
    records = [_rec(1, 0.75, False, mode="direct"), _rec(2, 0.85, False, mode="direct"), _rec(3, 0.5, False),
               _rec(4, 0.95, True, mode="direct"), _rec(5, 0.99, False, mode="deep_search"), _rec(6, 0.9, None)]
    w = wrong_vs_threshold(records, thresholds)
    assert [(m.mode, m.wrong, round(m.mean_confidence, 2)) for m in w.modes] == [("direct", 2, 0.8), ("standard", 1, 0.5)]
    assert w.mean_margin == pytest.approx(((0.75 - 0.7) + (0.85 - 0.7) + (0.5 - 0.8)) / 3) and w.below
    high = wrong_vs_threshold([_rec(1, 0.9, False, mode="direct")], thresholds)
    assert high.mean_margin == pytest.approx(0.2) and high.below is False
    assert wrong_vs_threshold([_rec(1, 0.9, True)], thresholds).below is None
