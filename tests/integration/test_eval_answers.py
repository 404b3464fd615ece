"""FinanceBench answers on the real stack: a handful of real questions as a batch of research jobs on real Celery
workers, over the pages of the smallest 10-K filings they reference (picked by type and file size, not by name).

- Gold-blind: the answer phase run again from a copy of the questions file with `answer`, `justification` and
  `evidence` removed gives the same answers (extractive provider, response cache off: every job runs afresh; one
  10-K retrieval at a time, see the test).
- A local OpenAI-compatible server (tests/support/fault_llm.py with its lexical model) answers every pipeline role
  over HTTP, and the LLM judge's schema-valid verdicts come from the same server by a simple rule."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ops.eval.financebench_answers import answer_questions, prompts_for, score_questions, summarise
from ops.eval.financebench_questions import FinanceBenchQuestion, load_questions
from tests.support import lexical_model
from tests.support.fault_llm import FaultLLMServer

pytestmark = pytest.mark.integration

GOLD_FIELDS = ("answer", "justification", "evidence")
N_FILINGS, N_QUESTIONS = 2, 2


@pytest.fixture(scope="module")
def fb_questions(ctx, shared_data) -> list[FinanceBenchQuestion]:
    """The first questions on the smallest 10-K filings that have pages, those filings ingested (hash embedder)."""
    from agent.ingest.filing_pages import read_manifest
    from ops.eval.financebench_ingest import ingest_financebench

    root = shared_data / "financebench"
    pages = root / "pages"
    manifest = read_manifest(root / "documents.jsonl")
    questions = [q for q in load_questions(root / "questions_dev.jsonl") if q.doc_name and (pages / f"{q.doc_name}.jsonl.gz").is_file()
                 and q.doc_name in manifest and manifest[q.doc_name].kind == "10k"]
    docs = sorted({q.doc_name for q in questions if q.doc_name}, key=lambda d: (pages / f"{d}.jsonl.gz").stat().st_size)[:N_FILINGS]
    report = ingest_financebench(ctx, root, doc_names=set(docs), fanout=None)
    assert not [f for f in report.files if f.status == "error"], report.files
    return [q for q in questions if q.doc_name in docs][:N_QUESTIONS]


def _blind_copy(questions: list[FinanceBenchQuestion], path: Path) -> list[FinanceBenchQuestion]:
    with path.open("w") as fh:
        for q in questions:
            row = {k: v for k, v in q.model_dump(mode="json").items() if k not in GOLD_FIELDS}
            fh.write(json.dumps(row) + "\n")
    return load_questions(path)


def test_the_answers_do_not_depend_on_the_gold_fields(ctx, fb_questions, workers_with, tmp_path):
    from tasks.dispatch import CeleryDispatcher

    # One 10-K retrieval at a time: parallel retrievals of sub-questions that share a chunk race to store it, and the
    # first writer's score and query shape the extractive answer, so two runs of one question can differ without it.
    workers_with(FINAGENT_LLM_CACHE_TTL_S="0", FINAGENT_TENK_PARALLELISM="1")
    blind = _blind_copy(fb_questions, tmp_path / "blind.jsonl")
    assert all(q.answer is None and q.justification is None and not q.evidence for q in blind)
    with_gold = answer_questions(ctx, CeleryDispatcher(), prompts_for(fb_questions), timeout_s=120, poll_s=0.3)
    without = answer_questions(ctx, CeleryDispatcher(), prompts_for(blind), timeout_s=120, poll_s=0.3)
    assert {a.job_id for a in with_gold}.isdisjoint({a.job_id for a in without})  # two runs, every job answered afresh

    def seen(answers):
        return [(a.id, a.status, a.answer, a.confidence, a.iterations, a.mode, a.citations) for a in answers]
    assert seen(with_gold) == seen(without)
    assert [a for a in with_gold if a.status == "completed" and a.answer.strip()], [(a.status, a.error) for a in with_gold]
    # and what each job was given is the question's text alone: no gold words in it, no company or period filter
    from agent.persistence import jobstore

    texts = {q.financebench_id: " ".join(q.question.split()) for q in fb_questions}
    for a in with_gold + without:
        job = jobstore.load_job(ctx.pool, a.job_id)
        assert job is not None
        request = job.state.request
        assert request.question == texts[a.id]
        assert (request.tickers, request.feedback, request.parent_job_id) == (None, None, None)

    from agent.settings import get_settings

    records = score_questions(fb_questions, with_gold, get_settings())
    assert [r.id for r in records] == [q.financebench_id for q in fb_questions]
    assert all(r.rule_correct is not None or r.method == "unscored" for r in records)
    assert all(r.judge_correct is None for r in records)  # no endpoint, no judge


# ---------- a local OpenAI-compatible endpoint ----------
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _judge_by_rule(body: dict) -> str:
    """The judge's verdict: correct when every number of the reference answer is in the answer (a stand-in rule)."""
    user = lexical_model._user(body)
    reference = json.loads(user.split("Reference answer: ", 1)[1].split("\n\n", 1)[0])
    answer = user.split("<<<ANSWER>>>", 1)[1].split("<<<END_ANSWER>>>", 1)[0]
    wanted = _NUMBER.findall(reference.replace(",", ""))
    have = set(_NUMBER.findall(answer.replace(",", "")))
    correct = bool(wanted) and all(n in have for n in wanted)
    return json.dumps({"reasoning": f"numbers of the reference {'all' if correct else 'not all'} in the answer", "correct": correct})


def _responder(body: dict) -> str:
    """The lexical model, whose plans search the annual filings (it plans transcript searches only), and the judge's rule."""
    schema = lexical_model.request_schema(body) or {}
    if schema.get("title") == "Verdict":
        return _judge_by_rule(body)
    if schema.get("title") == "PlanOutput":
        return json.dumps(lexical_model.plan(body) | {"data_sources": ["10k"], "needs_10k": True})
    return lexical_model.respond(body)


def test_against_a_local_openai_compatible_endpoint(ctx, fb_questions, workers_with, monkeypatch):
    from agent.settings import get_settings
    from ops.cli.eval_financebench_answers import provider_line
    from ops.eval.judge import Judge
    from tasks.dispatch import CeleryDispatcher

    with FaultLLMServer(seed=3) as srv:
        srv.responder = _responder
        env = dict(FINAGENT_LLM_PROVIDER="openai", FINAGENT_LLM_BASE_URL=srv.url, FINAGENT_LLM_API_KEY="sk-local-test",
                   FINAGENT_LLM_CACHE_TTL_S="0", FINAGENT_LLM_TIMEOUT_S="10")
        workers_with(**env)
        answered = answer_questions(ctx, CeleryDispatcher(), prompts_for(fb_questions), timeout_s=120, poll_s=0.3)
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        get_settings.cache_clear()
        try:
            settings = get_settings()
            judge = Judge(settings)
            records = score_questions(fb_questions, answered, settings, judge)
            line = provider_line(settings)
        finally:
            get_settings.cache_clear()
        calls = srv.chat_calls()
    assert all(a.status == "completed" for a in answered), [(a.status, a.error) for a in answered]
    roles = {c.role for c in calls}
    assert {"plan", "plan_10k", "answer_10k"} <= roles, roles
    verdicts = [c for c in calls if "Reference answer:" in json.dumps(c.messages)]
    assert len(verdicts) == len([a for a in answered if a.answer.strip()])
    assert all(r.judge_correct is not None and r.judge_reasoning for r in records if r.answer.strip())
    # the judge's verdict is the stand-in rule's, and it decides what the rules left unscored
    for r in records:
        if r.rule_correct is None and r.judge_correct is not None:
            assert (r.correct, r.method) == (r.judge_correct, "judge")
    summary = summarise(records, settings.llm_provider, judge.describe)
    assert summary.overall.questions == len(fb_questions) and summary.judge and srv.url in summary.judge
    assert line.startswith("Provider: **openai**") and srv.url in line
