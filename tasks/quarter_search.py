"""Search tasks (queue `search`): one quarter of one company for one keyword phrase."""
from __future__ import annotations

from agent.models.steps import SearchCall
from agent.work import calls as work
from tasks.fanout import JobTask
from workers.app import app
from workers.topology import CALL_TASKS


@app.task(name=CALL_TASKS["search"].name, base=JobTask, bind=True)
def search_quarter(self, job_id: str, iteration: int, call: dict) -> int | None:
    return self.run_call(job_id, iteration, SearchCall.model_validate(call), work.do_search)

