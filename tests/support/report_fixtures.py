"""Synthetic overnight batches for the morning-report tests (made-up questions and sources)."""
from __future__ import annotations

import datetime as dt

from agent.models.batch import BatchItem, BatchReport
from agent.models.job import JobResult
from agent.models.research import Citation

STARTED = dt.datetime(2026, 1, 5, 22, 0, tzinfo=dt.UTC)
MALICIOUS = "<script>document.title='pwned'</script> Revenue rose [1]."


def result(job_id: str, question: str, *, status: str = "completed", mode: str = "standard", confidence: float = 0.85,
           iterations: int = 2, prompt: int = 1000, completion: int = 200, cost: float = 0.01, answer: str = "",
           citations: list[Citation] | None = None, termination: str | None = "confidence_reached", error: str | None = None) -> JobResult:
    return JobResult(job_id=job_id, question=question, status=status, answer=answer, citations=citations or [],
                     confidence=confidence, iterations=iterations, tokens={"prompt": prompt, "completion": completion},
                     cost_usd=cost, provider="test", mode=mode, termination_reason=termination, error=error)


def cite(marker: str, text: str, **kw: str) -> Citation:
    return Citation(marker=marker, source_type=kw.pop("source_type", "transcript"), text=text, citation_key=f"k{marker}", **kw)


def sample_batch() -> BatchReport:
    """Nine lines: five completed (direct x2, standard x2, detailed), one failed, one rejected, one invalid,
    one queued. Totals: prompt 1000+1200+2000+2500+4000+300 = 11000, completion 100+150+300+350+700+50 = 1650,
    cost 0.002+0.003+0.02+0.025+0.06+0.001 = 0.111; wall time 2 h."""
    items = [
        BatchItem(line=1, key="a", question="How did the widget maker's margin move last quarter?", mode="direct",
                  status="completed", job_id="j1", seconds=30.0,
                  result=result("j1", "q1", mode="direct", confidence=0.78, iterations=1, prompt=1000, completion=100, cost=0.002,
                                answer="Gross margin widened to 41% [1], helped by pricing [2].",
                                citations=[cite("[1]", "We expanded gross margin to 41 percent this quarter.", ticker="WIDG",
                                                period="2025 Q3", speaker="CFO"),
                                           cite("[2]", "Pricing actions more than offset input costs.", ticker="WIDG", period="2025 Q3",
                                                url="https://example.com/call")])),
        BatchItem(line=2, key="b", question="What guidance did the bank give?", mode="direct", status="completed", job_id="j2",
                  seconds=45.0, result=result("j2", "q2", mode="direct", confidence=0.72, iterations=2, prompt=1200, completion=150,
                                              cost=0.003, answer="Guidance was unchanged [1].", termination="max_iterations",
                                              citations=[cite("[1]", "We reaffirm our outlook.", ticker="BANK", period="2025 Q2")])),
        BatchItem(line=3, key="c", question="Summarise the risk factors", mode="standard", status="completed", job_id="j3",
                  seconds=120.0, result=result("j3", "q3", mode="standard", confidence=0.88, iterations=2, prompt=2000, completion=300,
                                               cost=0.02, answer="Supply concentration is the main risk [10K1].",
                                               citations=[cite("[10K1]", "We rely on a single supplier.", source_type="10k",
                                                               ticker="WIDG", period="FY2024", item="1A")])),
        BatchItem(line=4, key="d", question="Untrusted answer test", mode="standard", status="completed", job_id="j4", seconds=150.0,
                  result=result("j4", "q4", mode="standard", confidence=0.91, iterations=3, prompt=2500, completion=350, cost=0.025,
                                answer=MALICIOUS, termination="max_iterations",
                                citations=[cite("[1]", "<img src=x onerror=alert(1)>", ticker="EVIL", url="javascript:alert(1)")])),
        BatchItem(line=5, key="e", question="Compare the two retailers over three years", mode="detailed", status="completed",
                  job_id="j5", seconds=400.0, result=result("j5", "q5", mode="detailed", confidence=0.93, iterations=3, prompt=4000,
                                                            completion=700, cost=0.06, answer="Retailer A grew faster [N1].",
                                                            citations=[cite("[N1]", "A news excerpt.", source_type="news")])),
        BatchItem(line=6, key="f", question="What did the airline say about fuel?", mode="standard", status="failed", job_id="j6",
                  seconds=60.0, error="LLM provider unavailable after 3 retries",
                  result=result("j6", "q6", status="failed", confidence=0.0, iterations=0, prompt=300, completion=50, cost=0.001,
                                termination="error", error="LLM provider unavailable after 3 retries")),
        BatchItem(line=7, key="g", question="Tell me about ZZZZ", mode="standard", status="rejected", job_id="j7", seconds=5.0,
                  result=result("j7", "q7", status="rejected", confidence=0.0, iterations=0, prompt=0, completion=0, cost=0.0,
                                termination="unknown ticker ZZZZ")),
        BatchItem(line=8, key=None, question="", status="invalid", error="line 8: question is too short (min 3 characters)"),
        BatchItem(line=9, key="i", question="Still waiting on this one", mode="standard", status="queued", job_id="j9"),
    ]
    return BatchReport(name="overnight-test", started_at=STARTED, finished_at=STARTED + dt.timedelta(hours=2), items=items)
