"""10-K agent tasks: plan, answer and evaluate on `llm`; retrieve (at most `tenk_parallelism` at once) on `search`."""
from __future__ import annotations

from agent.models.steps import TenKAnswerCall, TenKEvaluateCall, TenKPlanCall, TenKRetrieveCall
from agent.work import tenk_calls as work
from tasks.fanout import JobTask
from workers.app import app
from workers.topology import CALL_TASKS


@app.task(name=CALL_TASKS["tenk_plan"].name, base=JobTask, bind=True)
def tenk_plan(self, job_id: str, iteration: int, call: dict) -> None:
    self.run_call(job_id, iteration, TenKPlanCall.model_validate(call), work.do_plan)


@app.task(name=CALL_TASKS["tenk_retrieve"].name, base=JobTask, bind=True)
def tenk_retrieve(self, job_id: str, iteration: int, call: dict) -> None:
    self.run_call(job_id, iteration, TenKRetrieveCall.model_validate(call), work.do_retrieve)


@app.task(name=CALL_TASKS["tenk_answer"].name, base=JobTask, bind=True)
def tenk_answer(self, job_id: str, iteration: int, call: dict) -> None:
    self.run_call(job_id, iteration, TenKAnswerCall.model_validate(call), work.do_answer)


@app.task(name=CALL_TASKS["tenk_evaluate"].name, base=JobTask, bind=True)
def tenk_evaluate(self, job_id: str, iteration: int, call: dict) -> None:
    self.run_call(job_id, iteration, TenKEvaluateCall.model_validate(call), work.do_evaluate)
