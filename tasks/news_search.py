"""News search task (queue `llm`: network-bound)."""
from __future__ import annotations

from agent.models.steps import NewsCall
from agent.work import calls as work
from tasks.fanout import JobTask
from workers.app import app
from workers.topology import CALL_TASKS


@app.task(name=CALL_TASKS["news"].name, base=JobTask, bind=True)
def news_search(self, job_id: str, iteration: int, call: dict) -> None:
    self.run_call(job_id, iteration, NewsCall.model_validate(call), work.do_news)
