"""LLM-role tasks (queue `llm`): plan, extract, compose, evaluate."""
from __future__ import annotations

from agent.pipeline import work
from tasks.base import JobTask
from workers.app import app, context


@app.task(name="tasks.llm.plan", base=JobTask, bind=True)
def plan(self, job_id: str) -> None:
    ctx = context()
    self.guarded(ctx, job_id, "0:plan", work.do_plan, ctx, ctx.llm, job_id)


@app.task(name="tasks.llm.extract", base=JobTask, bind=True)
def extract(self, job_id: str, iteration: int, scope: str) -> None:
    ctx = context()
    self.guarded(ctx, job_id, f"{iteration}:extract:{scope}", work.do_extract, ctx, ctx.llm, job_id, iteration, scope)


@app.task(name="tasks.llm.compose", base=JobTask, bind=True)
def compose(self, job_id: str, iteration: int) -> None:
    ctx = context()
    self.guarded(ctx, job_id, f"{iteration}:compose", work.do_compose, ctx, ctx.llm, job_id, iteration)


@app.task(name="tasks.llm.evaluate", base=JobTask, bind=True)
def evaluate(self, job_id: str, iteration: int, scope: str) -> None:
    ctx = context()
    self.guarded(ctx, job_id, f"{iteration}:evaluate:{scope}", work.do_evaluate, ctx, ctx.llm, job_id, iteration, scope)
