"""The news part of a coordinator step: report what the news call of this iteration found."""
from __future__ import annotations

from agent.models.steps import FailedOutput, NewsOutput, Stage
from agent.pipeline.stage_context import StageContext


def collect_news(step: StageContext) -> None:
    out = next(iter(step.read(Stage.news).values()), None)
    if out is None:
        return
    if isinstance(out, FailedOutput):  # the task itself failed for good
        out = NewsOutput(status="error", reason=out.error, query=step.state.pending_news_query, count=0)
    assert isinstance(out, NewsOutput)
    step.state.news_status = out.status if out.status == "ok" else f"{out.status}: {out.reason or ''}"
    if out.summary:
        step.state.news_summary = out.summary
    message = (f"Found {out.count} news articles" if out.status == "ok"
               else f"News search {out.status}: {out.reason or ''}")
    step.emit("news_search", message, status=out.status, query=out.query, articles=out.count, reason=out.reason)
