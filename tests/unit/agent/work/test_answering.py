"""What the answer and evaluation calls are given: the right passages per scope, the news summary, and what a
refinement round must fix."""
from __future__ import annotations

from agent.models.job import JobRequest, JobState, Limits
from agent.models.research import Answer, Evidence, ScopeFindings, Usage
from agent.work.answering import assign_markers, run_compose, run_evaluate
from tests.support.machine_driver import evaluation, plan


class Recorder:
    name = "recorder"

    def __init__(self):
        self.requests: list = []

    def evaluate(self, req):
        self.requests.append(req)
        return evaluation(80, scope=req.scope), Usage()

    def compose(self, req):
        self.requests.append(req)
        return Answer(text="Prices rose [N1]."), Usage()


def job_state() -> JobState:
    st = JobState(request=JobRequest(question="How did pricing change?", feedback="shorter please"), iteration=2)
    st.plan = plan()
    st.limits = Limits(max_iterations=3, max_iterations_effective=3, max_tokens=6000, confidence_threshold=0.8,
                       max_duration_seconds=180)
    st.answer = Answer(text="Prices rose [N1].")
    return st


EVIDENCE = [
    Evidence(source_type="transcript", chunk_id=1, ticker="ACME", fiscal_year=2025, fiscal_quarter=1, text="Revenue rose."),
    Evidence(source_type="news", chunk_id="https://example.test/a", text="Acme raised prices.", url="https://example.test/a"),
]


def test_a_news_evaluation_is_given_the_news_passages():
    llm = Recorder()
    run_evaluate(llm, job_state(), "news", EVIDENCE, assign_markers(EVIDENCE), "")
    assert [e.source_type for e in llm.requests[0].evidence] == ["news"]


def test_the_generator_sees_the_news_summary_and_what_to_revise():
    llm, st = Recorder(), job_state()
    st.news_summary, st.revision_notes = "Prices rose in the quarter.", ["no figure for the price increase"]
    run_compose(llm, st, [ScopeFindings(scope="news")], EVIDENCE, assign_markers(EVIDENCE), "")
    req = llm.requests[0]
    assert req.news_summary == "Prices rose in the quarter."
    assert "shorter please" in req.feedback and "no figure for the price increase" in req.feedback


def test_a_partial_answer_lists_each_finding_with_its_citation():
    from agent.models.research import Finding
    from agent.work.answering import partial_answer

    markers = assign_markers(EVIDENCE)
    keys = [e.citation_key for e in EVIDENCE]
    findings = [ScopeFindings(scope="ACME:2025_q1", findings=[Finding(citation_key=keys[0], text="Revenue rose.")]),
                ScopeFindings(scope="news", findings=[Finding(citation_key=keys[1], text="Prices went up."),
                                                      Finding(citation_key="unknown", text="Uncited claim.")])]
    partial = partial_answer(findings, EVIDENCE, markers)
    assert partial is not None and partial.text.startswith("Partial answer")
    assert f"- Revenue rose. {markers[keys[0]]}" in partial.text and "Uncited claim" not in partial.text
    assert [c.citation_key for c in partial.citations] == keys
    assert partial_answer([ScopeFindings(scope="news")], EVIDENCE, markers) is None
