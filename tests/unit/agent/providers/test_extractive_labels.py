"""The answer's period labels: a call's quarter, a 10-K's fiscal year, a quarter's filing."""
from __future__ import annotations

from agent.models.research import Evidence, Finding, ResearchPlan, ScopeFindings
from agent.providers.llm.extractive import ExtractiveProvider, _blocks
from agent.providers.llm.roles import ComposeRequest


def test_a_quarters_filing_is_labelled_as_one_not_as_the_10k():
    """Filings evidence (the ':10k' scope) from a 10-Q or an earnings release carries its quarter: its answer line says
    so, and the answer's blocks still read it."""
    quarterly = Evidence(source_type="10k", chunk_id=3, ticker="ZZQ", fiscal_year=2031, fiscal_quarter=2, page=4,
                         text="Total current assets were $812 million at the end of the quarter.", score=0.9)
    annual = quarterly.model_copy(update={"chunk_id": 4, "fiscal_quarter": 0})
    texts = []
    for ev in (quarterly, annual):
        found = ScopeFindings(scope="ZZQ:10k", findings=[Finding(citation_key=ev.citation_key, text=ev.text)])
        answer, _ = ExtractiveProvider().compose(ComposeRequest(
            question="q", plan=ResearchPlan(reasoning="r", tickers=["ZZQ"]), findings=[found], evidence=[ev],
            markers={ev.citation_key: "[10K1]"}, max_tokens=500))
        texts.append(answer.text)
    assert "- Q2 FY2031 filing: Total current assets" in texts[0] and "- 10-K FY2031: Total current assets" in texts[1]
    assert list(_blocks(texts[0])["ZZQ"]) == ["Q2 FY2031 filing"]
