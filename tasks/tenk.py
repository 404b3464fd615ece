"""10-K agent tasks (queue `llm`): plan, retrieve (at most 6 in parallel), answer, evaluate."""
from __future__ import annotations

from agent.tenk import work
from tasks.base import JobTask
from workers.app import app, context


@app.task(name="tasks.tenk.plan", base=JobTask, bind=True)
def tenk_plan(self, job_id: str, iteration: int, round: int, ticker: str, fiscal_year: int, missing_info: list[str]) -> None:
    ctx = context()
    self.guarded(ctx, job_id, f"{iteration}:tenk{round}:plan:{ticker}", work.do_plan, ctx, ctx.llm, job_id, iteration,
                 round, ticker, fiscal_year, missing_info)


@app.task(name="tasks.tenk.retrieve", base=JobTask, bind=True)
def tenk_retrieve(self, job_id: str, iteration: int, round: int, slot: int, assignments: list[list]) -> None:
    ctx = context()
    self.guarded(ctx, job_id, f"{iteration}:tenk{round}:retrieve:{slot}", work.do_retrieve, ctx, ctx.llm, job_id,
                 iteration, round, slot, assignments)


@app.task(name="tasks.tenk.answer", base=JobTask, bind=True)
def tenk_answer(self, job_id: str, iteration: int, round: int, ticker: str) -> None:
    ctx = context()
    self.guarded(ctx, job_id, f"{iteration}:tenk{round}:answer:{ticker}", work.do_answer, ctx, ctx.llm, job_id,
                 iteration, round, ticker)


@app.task(name="tasks.tenk.evaluate", base=JobTask, bind=True)
def tenk_evaluate(self, job_id: str, iteration: int, round: int, ticker: str) -> None:
    ctx = context()
    self.guarded(ctx, job_id, f"{iteration}:tenk{round}:evaluate:{ticker}", work.do_evaluate, ctx, ctx.llm, job_id,
                 iteration, round, ticker)
