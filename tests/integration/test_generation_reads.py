"""What a generation call reads first (agent.work.calls.generation_inputs_with), on a real Postgres: what was parsed
is kept by the version it was read at, and a write to the job, new evidence or rescored evidence make a new version."""
from __future__ import annotations

import pytest

from agent.db import one_transaction
from agent.models.job import JobRequest, JobState
from agent.models.research import Answer, Evidence
from agent.models.steps import ComposeOutput, Stage, StepKey
from agent.persistence import jobstore
from agent.work.calls import generation_inputs, generation_inputs_with

pytestmark = pytest.mark.integration


def _passage(n: int, score: float = 0.5) -> Evidence:
    return Evidence(source_type="transcript", chunk_id=n, ticker="XCO", fiscal_year=2024, fiscal_quarter=1,
                    text=f"passage {n}", score=score)


@pytest.fixture
def job_id(ctx) -> str:
    job_id, _ = jobstore.create_job(ctx.pool, JobState(request=JobRequest(question="How did revenue change?")))
    jobstore.add_evidence(ctx.pool, job_id, [_passage(1), _passage(2)])
    return job_id


def test_a_read_at_the_same_version_parses_nothing_again(ctx, job_id):
    state, merged = generation_inputs(ctx, job_id)
    again, merged_again = generation_inputs(ctx, job_id)
    assert again is state and merged_again.evidence[0] is merged.evidence[0]  # the parsed objects, kept
    assert merged_again.evidence is not merged.evidence  # each caller its own containers
    assert [e.text for e in merged.evidence] == ["passage 1", "passage 2"]


def test_new_evidence_rescored_evidence_and_a_saved_state_are_read_again(ctx, job_id):
    state, _ = generation_inputs(ctx, job_id)
    jobstore.add_evidence(ctx.pool, job_id, [_passage(3)])
    after_new, merged = generation_inputs(ctx, job_id)
    assert after_new is not state and len(merged.evidence) == 3

    jobstore.add_evidence(ctx.pool, job_id, [_passage(1, score=0.9)])  # a sibling search found it with a higher score
    _, merged = generation_inputs(ctx, job_id)
    assert len(merged.evidence) == 3 and merged.evidence[0].text == "passage 1" and merged.evidence[0].score == 0.9

    job = jobstore.load_job(ctx.pool, job_id)
    job.state.iteration = 2
    with one_transaction(ctx.pool) as conn:
        jobstore.save_job(conn, job, "running", "2:search")
    saved, _ = generation_inputs(ctx, job_id)
    assert saved.iteration == 2


def test_the_outputs_asked_for_come_with_the_read(ctx, job_id):
    key = StepKey(iteration=1, stage=Stage.compose)
    _, _, outputs = generation_inputs_with(ctx, job_id, str(key))
    assert outputs.one(1, Stage.compose) is None
    jobstore.put_output(ctx.pool, job_id, key, ComposeOutput(answer=Answer(text="Revenue rose [1]."), finished_at=5.0))
    _, _, outputs = generation_inputs_with(ctx, job_id, str(key))
    composed = outputs.one(1, Stage.compose)
    assert isinstance(composed, ComposeOutput) and composed.answer.text == "Revenue rose [1]." and composed.finished_at == 5.0


def test_a_caller_holding_the_version_receives_neither_state_nor_evidence(ctx, job_id):
    full = jobstore.generation_rows(ctx.pool, job_id)
    assert full.state is not None and len(full.evidence) == 2
    held = jobstore.generation_rows(ctx.pool, job_id, held_version=full.version)
    assert (held.version, held.state, held.evidence) == (full.version, None, [])
    jobstore.add_evidence(ctx.pool, job_id, [_passage(3)])
    moved = jobstore.generation_rows(ctx.pool, job_id, held_version=full.version)
    assert moved.version != full.version and moved.state == full.state and len(moved.evidence) == 3


def test_a_read_whose_kept_parse_was_let_go_reads_everything_again(ctx, job_id, monkeypatch):
    """The version this process held was evicted between asking and reading: the read is made again in full."""
    import agent.work.calls as research

    state, _ = generation_inputs(ctx, job_id)
    version = jobstore.generation_rows(ctx.pool, job_id).version
    monkeypatch.setattr(research._generation_kept, "version", lambda key: version)  # says it holds it ...
    monkeypatch.setattr(research._generation_kept, "get", lambda key, v: None)  # ... and no longer does
    again, merged = generation_inputs(ctx, job_id)
    assert again == state and again is not state and [e.text for e in merged.evidence] == ["passage 1", "passage 2"]


def _scores(ctx, job_id: str) -> dict[int, float]:
    with ctx.pool.connection() as conn:
        rows = conn.execute("SELECT score, payload FROM job_evidence WHERE job_id = %s", (job_id,)).fetchall()
    assert all(r["payload"]["score"] == r["score"] for r in rows)  # the column and the payload agree
    return {r["payload"]["chunk_id"]: r["score"] for r in rows}


def test_add_evidence_counts_what_it_added_and_keeps_each_passage_once_at_its_best_score(ctx):
    job_id, _ = jobstore.create_job(ctx.pool, JobState(request=JobRequest(question="How did revenue change?")))
    odd = 0.1 + 0.2  # a float whose shortest decimal form is long: stored and read back exactly
    # a passage listed twice in one call is added once, as listed first
    assert jobstore.add_evidence(ctx.pool, job_id, [_passage(2, score=odd), _passage(1), _passage(2, score=0.2)]) == 2
    assert _scores(ctx, job_id) == {1: 0.5, 2: odd}
    assert jobstore.add_evidence(ctx.pool, job_id, [_passage(1, score=0.4), _passage(3)]) == 1  # a lower score: kept
    later = _passage(3, score=0.99).model_copy(update={"iteration": 2})  # a later iteration's find changes nothing
    assert jobstore.add_evidence(ctx.pool, job_id, [_passage(2, score=0.95), later]) == 0
    assert _scores(ctx, job_id) == {1: 0.5, 2: 0.95, 3: 0.5}
    with ctx.pool.connection() as conn:
        rows = conn.execute("SELECT citation_key, iteration, source_type FROM job_evidence WHERE job_id = %s"
                            " ORDER BY citation_key", (job_id,)).fetchall()
    assert [(r["citation_key"], r["iteration"], r["source_type"]) for r in rows] == [
        (_passage(n).citation_key, 1, "transcript") for n in (1, 2, 3)]
