"""Search tasks (queue `search`): one quarter of one company for one keyword phrase."""
from __future__ import annotations

from agent.models.steps import SearchCall
from agent.retrieval import keyword_index
from agent.work import calls as work
from tasks.fanout import JobTask
from workers.app import app
from workers.process_context import context
from workers.topology import CALL_TASKS, SYNC_KEYWORD_INDEX


@app.task(name=CALL_TASKS["search"].name, base=JobTask, bind=True)
def search_quarter(self, job_id: str, iteration: int, call: dict) -> int | None:
    return self.run_call(job_id, iteration, SearchCall.model_validate(call), work.do_search)


@app.task(name=SYNC_KEYWORD_INDEX.name)
def sync_keyword_index() -> list[dict]:
    """Beat: append the chunks ingested since the last sync to this host's BM25 index (a no-op when current)."""
    ctx = context()
    return [r.model_dump() for r in keyword_index.sync_all(ctx.pool, ctx.settings.data_dir)]
