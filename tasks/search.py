"""Search tasks (queue `search`): one quarter of one company for one keyword phrase."""
from __future__ import annotations

from agent.pipeline import work
from agent.pipeline.retrieval import SearchSpec
from tasks.base import JobTask
from workers.app import app, context


@app.task(name="tasks.search.search_quarter", base=JobTask, bind=True)
def search_quarter(self, job_id: str, iteration: int, n: int, spec: dict) -> int | None:
    ctx = context()
    return self.guarded(ctx, job_id, f"{iteration}:search:{n}", work.do_search, ctx, job_id, iteration, n,
                        SearchSpec.model_validate(spec))
