"""News search task (queue `llm`: network-bound)."""
from __future__ import annotations

from agent.pipeline import work
from tasks.base import JobTask
from workers.app import app, context


@app.task(name="tasks.news.news_search", base=JobTask, bind=True)
def news_search(self, job_id: str, iteration: int, query: str) -> None:
    ctx = context()
    self.guarded(ctx, job_id, f"{iteration}:news", work.do_news, ctx, job_id, iteration, query)
