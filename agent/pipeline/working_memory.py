"""What a round's extractions leave for the composer: how the evidence was used, and the working memory (each scope's
summary of the passages over its token budget). The coordinator records both in the job's state; the composer, which
runs right behind the extractions, folds the same outputs itself."""
from __future__ import annotations

from agent.models.job import ContextUse
from agent.models.steps import ExtractOutput


def context_use(outs: list[ExtractOutput]) -> ContextUse:
    return ContextUse(verbatim=sum(o.verbatim for o in outs), summarised=sum(len(o.summarised) for o in outs),
                      summarised_scopes=sorted(o.findings.scope for o in outs if o.summarised),
                      merged=sum(o.merged for o in outs), tokens_saved=sum(o.tokens_saved for o in outs))


def working_memory(outs: list[ExtractOutput]) -> str | None:
    return "\n".join(f"{o.findings.scope}: {o.summary}" for o in outs if o.summary) or None
