"""The extractive provider keeps a segment's figure from reading as the company total."""
from __future__ import annotations

from agent.models.research import Evidence
from agent.providers.llm.extractive import ExtractiveProvider, _segment_lead
from agent.providers.llm.roles import ExtractRequest

CHUNK = ("Colette Kress -- Chief Financial Officer: Thank you. Q3 was another record quarter. Revenue of $35.1 billion "
         "was up 17% sequentially and up 94% year on year.\n\nStarting with Data Center. Another record was achieved in "
         "Data Center. Revenue of $30.8 billion, up from $26.3 billion in Q2, was up 17% sequentially and up 112% year "
         "on year. NVIDIA Hopper demand is exceptional.")


def test_segment_lead_ins():
    assert _segment_lead("Starting with Data Center.") == "Data Center"
    assert _segment_lead("Moving to Gaming and AI PCs.") == "Gaming"
    assert _segment_lead("Another record was achieved in Data Center.") == "Data Center"
    assert _segment_lead("Revenue of $35.1 billion was up 17% sequentially and up 94% year on year.") is None


def test_segment_figure_is_labelled_and_the_total_leads():
    ev = Evidence(source_type="transcript", chunk_id=1, ticker="NVDA", fiscal_year=2025, fiscal_quarter=3, text=CHUNK,
                  semantic=0.5, keyword=0.5, score=0.9, iteration=1, query="revenue")
    req = ExtractRequest(question="What was NVDA's revenue last quarter?", reasoning="look up revenue",
                         scope="NVDA:2025_q3", evidence=[ev], markers={ev.citation_key: "[1]"})
    findings, _ = ExtractiveProvider().extract(req)
    texts = [f.text for f in findings.findings]
    assert texts[0].startswith("Revenue of $35.1 billion")
    assert any(t.startswith("Data Center: Revenue of $30.8 billion") for t in texts)
    assert not any(t.startswith("Revenue of $30.8") for t in texts)
