"""The FinanceBench answers eval without services: what the answer phase is given, how verdicts combine, the
splits, the report's first line, and bad input to `finagent eval financebench --answers` (one line, exit 2,
nothing started). Questions and answers here are made up."""
from __future__ import annotations

import gzip
import json
from dataclasses import dataclass

import pytest
from typer.testing import CliRunner

from agent.settings import Settings
from ops.eval.financebench_answers import Answered, AnswerPrompt, prompts_for, score_questions, summarise
from ops.eval.financebench_questions import FinanceBenchQuestion


def _q(i: int, answer: str, qtype: str = "metrics-generated", reasoning: str | None = "Numerical reasoning") -> FinanceBenchQuestion:
    return FinanceBenchQuestion(financebench_id=f"q{i}", question=f"What was Acme's metric {i} in FY2031? Answer in USD millions.",
                                answer=answer, justification="secret working", question_type=qtype, question_reasoning=reasoning,
                                company="Acme", doc_name="ACME_2031_10K",
                                evidence=[{"doc_name": "ACME_2031_10K", "evidence_page_num": 3, "evidence_text": "gold text"}])


def _a(i: int, answer: str, status: str = "completed", confidence: float = 0.8, iterations: int = 1, mode: str = "standard") -> Answered:
    return Answered(id=f"q{i}", question="...", status=status, answer=answer, confidence=confidence, iterations=iterations, mode=mode)


def test_the_answer_phase_is_given_the_id_and_the_question_only():
    assert set(AnswerPrompt.model_fields) == {"id", "question"}
    [prompt] = prompts_for([_q(1, "$120.00")])
    dumped = prompt.model_dump_json()
    assert "120" not in dumped and "secret" not in dumped and "gold text" not in dumped and "ACME_2031_10K" not in dumped


@dataclass
class _Verdict:
    correct: bool
    reasoning: str


def test_rules_decide_first_the_judge_decides_the_rest():
    questions = [_q(1, "$120.00"), _q(2, "$75.00"), _q(3, "Yes, it was renewed.", "novel-generated", None),
                 _q(4, "$9.00", "domain-relevant", "Information extraction")]
    answered = [_a(1, "Revenue was $120 million [1]."), _a(2, "It was $80 million.", confidence=0.9, iterations=3),
                _a(3, "The agreement was extended in March."), _a(4, "", status="failed", confidence=0.0)]
    calls = []

    def judge(question: str, gold: str, answer: str) -> _Verdict:
        calls.append(gold)
        return _Verdict(correct=True, reasoning="stand-in")

    records = score_questions(questions, answered, Settings(), judge)
    by_id = {r.id: r for r in records}
    assert (by_id["q1"].correct, by_id["q1"].method) == (True, "numeric")
    assert (by_id["q2"].correct, by_id["q2"].method, by_id["q2"].judge_correct) == (False, "numeric", True)  # rules win
    assert (by_id["q3"].correct, by_id["q3"].method, by_id["q3"].rule_correct) == (True, "judge", None)
    assert (by_id["q4"].correct, by_id["q4"].method) == (False, "no_answer")
    assert len(calls) == 3  # no answer, nothing to judge
    assert by_id["q1"].early_terminated is True and by_id["q2"].early_terminated is False  # standard allows 3
    assert by_id["q4"].early_terminated is None

    summary = summarise(records, "extractive", None)
    assert (summary.overall.questions, summary.overall.correct, summary.overall.wrong) == (4, 2, 2)
    assert [(s.name, s.questions, s.correct) for s in summary.by_question_type] == [
        ("metrics-generated", 2, 1), ("domain-relevant", 1, 0), ("novel-generated", 1, 1)]
    assert {s.name for s in summary.by_reasoning} == {"Numerical reasoning", "Information extraction", "(none given)"}
    assert summary.judge_agreement == pytest.approx(1 / 2)  # q1 agrees, q2 does not


def test_without_a_judge_what_the_rules_cannot_decide_stays_unscored():
    records = score_questions([_q(3, "Yes, it was renewed.", "novel-generated", None)], [_a(3, "The agreement was extended.")], Settings())
    assert (records[0].correct, records[0].method) == (None, "unscored")
    s = summarise(records, "extractive", None).overall
    assert (s.unscored, s.accuracy, s.accuracy_scored) == (1, 0.0, None)


def test_the_report_names_the_provider_first():
    from ops.cli.eval_financebench_answers import markdown, provider_line

    records = score_questions([_q(1, "$120.00")], [_a(1, "Revenue was $120 million.")], Settings())
    extractive = provider_line(Settings(llm_provider="extractive"))
    text = markdown(summarise(records, "extractive", None), extractive, "finagent eval financebench --answers", 0)
    lines = [line for line in text.splitlines() if line.strip()]
    assert lines[0] == "## FinanceBench answers" and lines[1] == extractive and "no OpenAI-compatible endpoint" in lines[1]
    openai = provider_line(Settings(llm_provider="openai", llm_base_url="http://127.0.0.1:9/v1"))
    assert openai.startswith("Provider: **openai** at `http://127.0.0.1:9/v1`")


# ---------- bad input to the command ----------
@pytest.fixture
def pages_dir(tmp_path):
    root = tmp_path / "fb"
    (root / "pages").mkdir(parents=True)
    (root / "documents.jsonl").write_text(json.dumps({"doc_name": "ACME_2031_10K", "company": "Acme", "doc_type": "10k",
                                                      "doc_period": 2031}) + "\n")
    with gzip.open(root / "pages" / "ACME_2031_10K.jsonl.gz", "wt") as fh:
        fh.write(json.dumps({"doc_name": "ACME_2031_10K", "page": 0, "text": "Revenue was $120 million."}) + "\n")
    return root


@pytest.fixture
def run(tmp_path, monkeypatch):
    from agent.settings import get_settings
    from ops.cli.main import app

    monkeypatch.setenv("FINAGENT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("FINAGENT_LLM_PROVIDER", "extractive")
    get_settings.cache_clear()
    yield lambda *args: CliRunner().invoke(app, ["eval", "financebench", "--answers", *args])
    get_settings.cache_clear()


def _questions(tmp_path, rows) -> str:
    path = tmp_path / f"q{len(list(tmp_path.glob('q*.jsonl')))}.jsonl"
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return str(path)


def test_bad_input_is_one_line_and_exit_2_before_anything_starts(run, tmp_path, pages_dir):
    good = {"financebench_id": "a", "question": "What was Acme's revenue in FY2031?", "doc_name": "ACME_2031_10K"}
    cases = [
        (["--questions", _questions(tmp_path, [good, "{not json"]), "--data", str(pages_dir)], "line 2: not JSON"),
        (["--questions", str(tmp_path / "missing.jsonl"), "--data", str(pages_dir)], "no such questions file"),
        (["--questions", _questions(tmp_path, [good]), "--data", str(tmp_path / "nowhere")], "no such directory"),
        (["--questions", _questions(tmp_path, [good]), "--data", str(pages_dir), "--mode", "fastest"], "unknown mode 'fastest'"),
        (["--questions", _questions(tmp_path, [good]), "--data", str(pages_dir), "--judge"], "--judge needs an OpenAI-compatible"),
        (["--questions", _questions(tmp_path, [good | {"doc_name": "OTHER_2030_10K"}]), "--data", str(pages_dir)],
         "no question whose document has pages"),
    ]
    for args, message in cases:
        result = run(*args)
        assert result.exit_code == 2, (args, result.output)
        assert message in result.output, (message, result.output)
        assert len([line for line in result.output.splitlines() if line.strip()]) <= 2, result.output
    assert not (tmp_path / "data" / "postgres").exists() and not (tmp_path / "data" / "eval").exists()


def test_the_answers_plot_is_a_png():
    from ops.cli.eval_financebench_answers import answers_plot

    records = score_questions([_q(1, "$120.00"), _q(2, "Yes, renewed.", "novel-generated")],
                              [_a(1, "Revenue was $120 million."), _a(2, "It was extended.")], Settings())
    assert answers_plot(summarise(records, "extractive", None))[:8] == b"\x89PNG\r\n\x1a\n"


def test_one_setting_points_the_run_at_an_endpoint(monkeypatch):
    from agent.settings import get_settings
    from ops.cli.eval_financebench_answers import use_endpoint
    from ops.eval.judge import judge_enabled

    monkeypatch.setenv("FINAGENT_LLM_PROVIDER", "extractive")
    monkeypatch.delenv("FINAGENT_LLM_BASE_URL", raising=False)
    get_settings.cache_clear()
    try:
        assert not judge_enabled(get_settings())
        use_endpoint("http://127.0.0.1:8080/v1")
        settings = get_settings()
        assert (settings.llm_provider, settings.llm_base_url, judge_enabled(settings)) == ("openai", "http://127.0.0.1:8080/v1", True)
    finally:
        monkeypatch.delenv("FINAGENT_LLM_PROVIDER", raising=False)
        monkeypatch.delenv("FINAGENT_LLM_BASE_URL", raising=False)
        get_settings.cache_clear()
