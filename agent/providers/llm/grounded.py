"""A model's extraction and composition kept grounded in the evidence, whatever the model.

A weak or local model can read passages that state the figure asked for and return no findings, or write an answer
that cites none of its markers. Either leaves the job with nothing it can stand behind. In those two cases only, the
offline extractive provider (verbatim, cited sentences from the same evidence) answers the call instead, and a
warning says so; the model's usage is kept, since the call was made. A 10-K plan the model cannot write in its schema
(even after the repair request), or cannot send in time (a timeout or a lost connection after the client's own
retries), is the rules' plan instead, so the filing is still read and its figures computed: without a plan the job
read nothing of the filing. Other failures (a rejected key, a bad request) are the call's to report.
"""
from __future__ import annotations

import logging

from agent.infra.error_classes import classify_error
from agent.models.research import Answer, ScopeFindings
from agent.models.tenk import TenKPlan, TenKPlanRequest
from agent.providers.llm.roles import ComposeRequest, ExtractRequest, Usage
from agent.providers.llm.structured import StructuredOutputError

log = logging.getLogger(__name__)


def cites_any(text: str, markers: dict[str, str]) -> bool:
    return any(marker in text for marker in markers.values())


class GroundedProvider:
    """The inner provider, with the extractive provider's extraction or answer where the model's has nothing cited."""

    def __init__(self, inner, fallback=None):
        if fallback is None:
            from agent.providers.llm.extractive import ExtractiveProvider

            fallback = ExtractiveProvider()
        self.inner, self.fallback, self.name = inner, fallback, inner.name

    def __getattr__(self, attr):
        return getattr(self.inner, attr)

    def extract(self, req: ExtractRequest) -> tuple[ScopeFindings, Usage]:
        findings, usage = result = self.inner.extract(req)
        if findings.findings or not req.evidence:
            return result
        log.warning("the model found nothing in %d passages of %s: extractive findings used", len(req.evidence), req.scope)
        fallback, _ = self.fallback.extract(req)
        return fallback, usage

    def compose(self, req: ComposeRequest) -> tuple[Answer, Usage]:
        answer, usage = result = self.inner.compose(req)
        if not any(scope.findings for scope in req.findings) or cites_any(answer.text, req.markers):
            return result
        log.warning("the model's answer cites none of its %d findings: the extractive answer used",
                    sum(len(s.findings) for s in req.findings))
        fallback, _ = self.fallback.compose(req)
        return fallback, usage

    def plan_10k(self, req: TenKPlanRequest) -> tuple[TenKPlan, Usage]:
        try:
            return self.inner.plan_10k(req)
        except Exception as exc:
            if not isinstance(exc, StructuredOutputError) and classify_error(exc) != "network":
                raise
            why = "did not validate" if isinstance(exc, StructuredOutputError) else "was not received"
            log.warning("the model's 10-K plan for %s FY%d %s (%s): the rules' plan used", req.ticker, req.fiscal_year,
                        why, str(exc)[:200])
            return self.fallback.plan_10k(req)
