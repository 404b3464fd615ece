"""LLM-role tasks (queue `llm`): plan, extract, compose, evaluate."""
from __future__ import annotations

from agent.models.steps import ComposeCall, EvaluateCall, ExtractCall, PlanCall
from agent.work import calls as work
from tasks.fanout import JobTask
from workers.app import app
from workers.topology import CALL_TASKS


@app.task(name=CALL_TASKS["plan"].name, base=JobTask, bind=True)
def plan(self, job_id: str, iteration: int, call: dict) -> None:
    self.run_call(job_id, iteration, PlanCall.model_validate(call), work.do_plan)


@app.task(name=CALL_TASKS["extract"].name, base=JobTask, bind=True)
def extract(self, job_id: str, iteration: int, call: dict) -> None:
    self.run_call(job_id, iteration, ExtractCall.model_validate(call), work.do_extract)


@app.task(name=CALL_TASKS["compose"].name, base=JobTask, bind=True)
def compose(self, job_id: str, iteration: int, call: dict) -> None:
    self.run_call(job_id, iteration, ComposeCall.model_validate(call), work.do_compose)


@app.task(name=CALL_TASKS["evaluate"].name, base=JobTask, bind=True)
def evaluate(self, job_id: str, iteration: int, call: dict) -> None:
    self.run_call(job_id, iteration, EvaluateCall.model_validate(call), work.do_evaluate)
