"""The coordinator's vocabulary, typed: stages, the job's step, step-output keys, the calls a step fans
out and the payload each call stores.

Keys keep the string form stored in `research_jobs.step` and `job_step_outputs.step_key`:

| what                     | string form                       | example                  |
|--------------------------|-----------------------------------|--------------------------|
| job step                 | `start`, `done`, `{it}:{stage}`   | `2:evaluate`             |
| plan output              | `0:plan`                          |                          |
| search failure           | `{it}:search:{n}`                 | `1:search:4`             |
| news output              | `{it}:news`                       |                          |
| extract / evaluate       | `{it}:{stage}:{scope}`            | `1:extract:AAPL:2024_q4` |
| whole-answer evaluation  | `{it}:evaluate:whole`             |                          |
| compose                  | `{it}:compose`                    |                          |
| 10-K plan/answer/evaluate| `{it}:tenk{round}:{sub}:{filing}` | `1:tenk2:answer:AAPL:FY2024` |
| 10-K retrieve            | `{it}:tenk{round}:retrieve:{slot}`| `1:tenk1:retrieve:0`     |
"""
from __future__ import annotations

import re
from enum import Enum
from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import BaseModel, Field

from agent.models.financials import Computation
from agent.models.research import Answer, Evaluation, ResearchPlan, ScopeFindings, SearchSpec, Usage
from agent.models.tenk import TenKEvaluation, TenKPlan, filing_key


class Stage(str, Enum):
    """A fan-out stage: what the job is waiting for, and the kind of output its calls store."""

    plan = "plan"
    search = "search"
    news = "news"  # runs inside the search stage
    extract = "extract"
    compose = "compose"
    evaluate = "evaluate"
    tenk_plan = "tenk_plan"
    tenk_retrieve = "tenk_retrieve"
    tenk_answer = "tenk_answer"
    tenk_evaluate = "tenk_evaluate"

    @property
    def is_tenk(self) -> bool:
        return self.value.startswith("tenk_")


# the done_step of the delivery that wakes a cancelled job, whatever step it is waiting on
CANCEL_STEP = "cancel"


class JobStep(BaseModel, frozen=True):
    """Where a job stands: `start`, waiting on `{iteration}:{stage}`, or `done`."""

    iteration: int = 0
    stage: Stage | Literal["start", "done"] = "start"

    def __str__(self) -> str:
        if self.stage in ("start", "done"):
            return str(self.stage)
        return f"{self.iteration}:{Stage(self.stage).value}"

    @classmethod
    def parse(cls, text: str) -> JobStep:
        if text in ("start", "done"):
            return cls(stage=text)
        iteration, stage = text.split(":", 1)
        return cls(iteration=int(iteration), stage=Stage(stage))


_TENK_KEY = re.compile(r"^(\d+):tenk(\d+):(plan|retrieve|answer|evaluate)(?::(.+))?$")
_KEY = re.compile(r"^(\d+):(plan|search|news|extract|compose|evaluate)(?::(.+))?$")


class StepKey(BaseModel, frozen=True):
    """The key of one step output: iteration, stage, 10-K round, and the part (n, scope, ticker or slot)."""

    iteration: int
    stage: Stage
    round: int | None = None  # 10-K stages only
    part: str = ""

    def __str__(self) -> str:
        if self.stage.is_tenk:
            head = f"{self.iteration}:tenk{self.round}:{self.stage.value.removeprefix('tenk_')}"
        else:
            head = f"{self.iteration}:{self.stage.value}"
        return f"{head}:{self.part}" if self.part else head

    @classmethod
    def parse(cls, text: str) -> StepKey:
        if m := _TENK_KEY.match(text):
            return cls(iteration=int(m[1]), stage=Stage(f"tenk_{m[3]}"), round=int(m[2]), part=m[4] or "")
        if m := _KEY.match(text):
            return cls(iteration=int(m[1]), stage=Stage(m[2]), part=m[3] or "")
        raise ValueError(f"not a step-output key: {text!r}")


# ----- the payload each stage stores -----
class PlanOutput(BaseModel):
    plan: ResearchPlan
    usage: Usage = Field(default_factory=Usage)
    corrected: list[str] = Field(default_factory=list)  # parameter problems the planner was asked to correct


class NewsOutput(BaseModel):
    status: str  # 'ok', 'unavailable', 'error', ...
    reason: str | None = None
    query: str | None = None
    count: int = 0
    summary: str | None = None
    usage: Usage = Field(default_factory=Usage)


class ExtractOutput(BaseModel):
    findings: ScopeFindings
    usage: Usage = Field(default_factory=Usage)
    verbatim: int = 0  # passages the findings were drawn from
    summarised: list[str] = Field(default_factory=list)  # citation keys over the budget, folded into `summary`
    summary: str | None = None
    merged: int = 0  # adjacent chunks folded into their neighbour before extraction
    tokens_saved: int = 0  # by not repeating the text neighbouring chunks share


class ComposeOutput(BaseModel):
    answer: Answer
    usage: Usage = Field(default_factory=Usage)
    # when the composer finished (epoch seconds): with the evaluations chained behind it, the coordinator's next step
    # comes only after them, and this is where the round's generation time ends and its evaluation time begins
    finished_at: float | None = None


class EvaluateOutput(BaseModel):
    evaluation: Evaluation
    usage: Usage = Field(default_factory=Usage)


class TenKPlanOutput(BaseModel):
    plan: TenKPlan
    usage: Usage = Field(default_factory=Usage)


class SearchOutput(BaseModel):
    """A transcript search's outcome: its passages are the job's evidence rows; this says it ran, and how many it added."""

    added: int = 0
    usage: Usage = Field(default_factory=Usage)


class TenKRetrieveOutput(BaseModel):
    added: int = 0
    usage: Usage = Field(default_factory=Usage)


class TenKAnswerOutput(BaseModel):
    answer: Answer
    markers: dict[str, str]  # saved with the answer: later evidence can renumber markers, citation keys stay
    usage: Usage = Field(default_factory=Usage)
    computation: Computation | None = None  # the figure computed from the statements, shown first in the answer


class TenKEvaluateOutput(BaseModel):
    evaluation: TenKEvaluation
    usage: Usage = Field(default_factory=Usage)


# FailedOutput.error_class of an evaluation that did not run: there was no composed answer to evaluate, or the
# job's time had run out when the answer came (the coordinator then ends the job as it would have before evaluating)
NO_ANSWER, OUT_OF_TIME = "no_answer", "out_of_time"
NOT_EVALUATED = (NO_ANSWER, OUT_OF_TIME)


class FailedOutput(BaseModel):
    """What a task that failed for good stores instead of its payload, so its chord still completes."""

    error: str
    error_class: str | None = None
    retries: int = 0
    usage: Usage = Field(default_factory=Usage)


# Every call stores an output when it ends (its task's result is not kept: tasks/fanout.py)
OUTPUT_MODELS: dict[Stage, type[BaseModel]] = {
    Stage.plan: PlanOutput, Stage.search: SearchOutput, Stage.news: NewsOutput, Stage.extract: ExtractOutput,
    Stage.compose: ComposeOutput, Stage.evaluate: EvaluateOutput, Stage.tenk_plan: TenKPlanOutput,
    Stage.tenk_retrieve: TenKRetrieveOutput, Stage.tenk_answer: TenKAnswerOutput, Stage.tenk_evaluate: TenKEvaluateOutput,
}
StepOutput = Union[PlanOutput, SearchOutput, NewsOutput, ExtractOutput, ComposeOutput, EvaluateOutput,
                   TenKPlanOutput, TenKRetrieveOutput, TenKAnswerOutput, TenKEvaluateOutput, FailedOutput]


def parse_output(key: StepKey, raw: dict[str, Any]) -> StepOutput:
    """The stored JSON of one output as its typed payload; a failure record as FailedOutput."""
    if "error" in raw or key.stage not in OUTPUT_MODELS:
        return FailedOutput.model_validate(raw)
    return OUTPUT_MODELS[key.stage].model_validate(raw)  # type: ignore[return-value]


class StepOutputs(BaseModel):
    """The outputs a coordinator step reads, by key."""

    items: dict[StepKey, StepOutput] = Field(default_factory=dict)

    @classmethod
    def from_rows(cls, rows: dict[str, dict[str, Any]]) -> StepOutputs:
        keys = [StepKey.parse(k) for k in rows]
        return cls(items={k: parse_output(k, rows[str(k)]) for k in keys})

    def of(self, iteration: int, stage: Stage, round: int | None = None) -> dict[StepKey, StepOutput]:
        return {k: v for k, v in sorted(self.items.items(), key=lambda kv: str(kv[0]))
                if k.iteration == iteration and k.stage == stage and (round is None or k.round == round)}

    def one(self, iteration: int, stage: Stage) -> StepOutput | None:
        return next(iter(self.of(iteration, stage).values()), None)


# ----- the calls a step fans out (one Celery task each) -----
class _Call(BaseModel):
    stage: ClassVar[Stage]

    def part(self) -> str:
        """What tells this call's output apart from its siblings' in the same stage (a scope, a ticker, ...)."""
        return ""

    def output_key(self, iteration: int) -> StepKey:
        return StepKey(iteration=iteration, stage=self.stage, round=getattr(self, "round", None), part=self.part())


class PlanCall(_Call):
    stage: ClassVar[Stage] = Stage.plan
    task: Literal["plan"] = "plan"

    def output_key(self, iteration: int) -> StepKey:
        return StepKey(iteration=0, stage=Stage.plan)  # planning happens before the first iteration


class SearchCall(_Call):
    stage: ClassVar[Stage] = Stage.search
    task: Literal["search"] = "search"
    n: int
    spec: SearchSpec

    def part(self) -> str:
        return str(self.n)


class NewsCall(_Call):
    stage: ClassVar[Stage] = Stage.news
    task: Literal["news"] = "news"
    query: str


class ExtractCall(_Call):
    stage: ClassVar[Stage] = Stage.extract
    task: Literal["extract"] = "extract"
    scope: str

    def part(self) -> str:
        return self.scope


class ComposeCall(_Call):
    stage: ClassVar[Stage] = Stage.compose
    task: Literal["compose"] = "compose"


# the scope of the evaluation of the composed answer as a whole, beside the per-scope ones (pipeline.decision)
WHOLE_ANSWER = "whole"


class EvaluateCall(_Call):
    """One evaluation of the round's answer: of one scope's part of it, or of all of it (`WHOLE_ANSWER`)."""

    stage: ClassVar[Stage] = Stage.evaluate
    task: Literal["evaluate"] = "evaluate"
    scope: str

    def part(self) -> str:
        return self.scope


class _CompanyRoundCall(_Call):
    """A 10-K call about one company's filing for one fiscal year in one round; its output is keyed by both
    ('ACME:FY2024'). A call saved before the rounds were per filing has no year and is keyed by the ticker."""

    round: int
    ticker: str
    fiscal_year: int | None = None

    def part(self) -> str:
        return self.ticker if self.fiscal_year is None else filing_key(self.ticker, self.fiscal_year)


class TenKPlanCall(_CompanyRoundCall):
    stage: ClassVar[Stage] = Stage.tenk_plan
    task: Literal["tenk_plan"] = "tenk_plan"
    fiscal_year: int
    missing_info: list[str] = Field(default_factory=list)
    previous: str | None = None  # the step key of the plan to revise (an earlier iteration's), if any


class Assignment(BaseModel):
    ticker: str
    sub_question: int  # the sub-question's id in that filing's 10-K plan
    fiscal_year: int | None = None  # None: saved before the rounds were per filing

    def part(self) -> str:
        """The filing's part of the plan's step key (as its TenKPlanCall's)."""
        return self.ticker if self.fiscal_year is None else filing_key(self.ticker, self.fiscal_year)


class TenKRetrieveCall(_Call):
    stage: ClassVar[Stage] = Stage.tenk_retrieve
    task: Literal["tenk_retrieve"] = "tenk_retrieve"
    round: int
    slot: int
    assignments: list[Assignment]

    def part(self) -> str:
        return str(self.slot)


class TenKAnswerCall(_CompanyRoundCall):
    stage: ClassVar[Stage] = Stage.tenk_answer
    task: Literal["tenk_answer"] = "tenk_answer"


class TenKEvaluateCall(_CompanyRoundCall):
    stage: ClassVar[Stage] = Stage.tenk_evaluate
    task: Literal["tenk_evaluate"] = "tenk_evaluate"


TaskCall = Annotated[
    Union[PlanCall, SearchCall, NewsCall, ExtractCall, ComposeCall, EvaluateCall, TenKPlanCall, TenKRetrieveCall,
          TenKAnswerCall, TenKEvaluateCall],
    Field(discriminator="task"),
]
TaskKind = Literal["plan", "search", "news", "extract", "compose", "evaluate", "tenk_plan", "tenk_retrieve",
                   "tenk_answer", "tenk_evaluate"]


def call_chains(calls: list[TaskCall]) -> list[list[TaskCall]]:
    """The calls of one fan-out as the chains they run in: a company's 10-K evaluation right after that company's
    answer (it reads only that answer, so it starts as soon as the answer is in, not when every company's is), every
    other call on its own. Fanned out, each chain runs beside the others; not fanned out, they run one after another in
    this order."""
    chains: list[list[TaskCall]] = []
    answers: dict[tuple[int, str], list[TaskCall]] = {}
    for call in calls:
        if isinstance(call, TenKEvaluateCall) and (call.round, call.part()) in answers:
            answers[(call.round, call.part())].append(call)
            continue
        chains.append([call])
        if isinstance(call, TenKAnswerCall):
            answers[(call.round, call.part())] = chains[-1]
    return chains


# the answer round's calls run in this order: every extraction, then the compose, then the evaluations
_WAVE_OF: dict[str, int] = {Stage.compose: 1, Stage.evaluate: 2}


def call_waves(calls: list[TaskCall]) -> list[list[list[TaskCall]]]:
    """The calls of one dispatch as the waves they run in, each wave as its chains (`call_chains`): a wave starts when
    every call of the wave before it has finished. Only the answer round has more than one: its extractions, then
    the compose, which reads them, then the evaluations, which read the composed answer. Chained so, two of the
    round's three transitions go without a coordinator step in between."""
    waves: dict[int, list[TaskCall]] = {}
    for call in calls:
        waves.setdefault(wave_rank(call.stage), []).append(call)
    return [call_chains(waves[w]) for w in sorted(waves)]


def wave_rank(stage: Stage | str) -> int:
    """Where a stage's calls run in the answer round: 0 (first: the extractions, and every other stage), 1, 2."""
    return _WAVE_OF.get(stage, 0)
