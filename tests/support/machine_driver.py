"""Drive the pure coordinator state machine through a job without services: the test plays the
workers, answering each fan-out call with a typed output, and the database, keeping evidence counts."""
from __future__ import annotations

from collections.abc import Callable

from agent.models.corpus import Period
from agent.models.job import JobRequest, JobState
from agent.models.research import Answer, Evaluation, ResearchPlan, Usage
from agent.models.steps import JobStep, StepKey, StepOutput, StepOutputs, TaskCall
from agent.pipeline import machine
from agent.pipeline.inputs import Availability, EvidenceSummary, StepInput, StepOutcome
from agent.settings import Settings

SETTINGS = Settings(_env_file=None)  # type: ignore[call-arg]


def quarters(*keys: str) -> list[Period]:
    return [Period.parse_key(k) for k in keys]


AVAILABILITY = Availability(
    transcripts={"ACME": quarters("2024_q2", "2024_q3", "2024_q4", "2025_q1"), "BETA": quarters("2024_q4", "2025_q1")},
    tenk={"ACME": quarters("FY2024")},
    names={"ACME": "Acme Corp", "BETA": "Beta Holdings"},
)


def plan(**kw) -> ResearchPlan:
    fields = dict(reasoning="revenue trend", tickers=["ACME"], time_refs=["last 2 quarters"], topic="revenue",
                  search_queries=["revenue growth drivers"])
    return ResearchPlan(**(fields | kw))


def evaluation(score: int, *, keywords: list[str] | None = None, sufficient: bool = False, scope: str = "all",
               **kw) -> Evaluation:
    return Evaluation(completeness_score=score, specificity_score=score, accuracy_score=score, clarity_score=score,
                      followup_keywords=keywords or [], is_sufficient=sufficient, scope=scope, **kw)


def answer(text: str = "Revenue rose [1].") -> Answer:
    return Answer(text=text)


USAGE = Usage(prompt=10, completion=5)
Responder = Callable[[TaskCall, int], StepOutput | None]


class Job:
    """A job's state, its step and its evidence counts, advanced one coordinator step at a time."""

    def __init__(self, settings: Settings = SETTINGS, availability: Availability = AVAILABILITY, **request):
        self.state = JobState(request=JobRequest(**({"question": "How did revenue change?"} | request)))
        self.step = JobStep()
        self.settings, self.availability = settings, availability
        self.evidence: dict[int, int] = {}
        self.scopes: set[str] = set()
        self.now = 1_000.0
        self.outcomes: list[StepOutcome] = []
        self.stored: dict[StepKey, StepOutput] = {}  # every output so far, as job_step_outputs holds them
        self.provider_revises = True  # the LLM provider reworks an answer from feedback (the extractive one cannot)

    @property
    def last(self) -> StepOutcome:
        return self.outcomes[-1]

    def find(self, chunks: int, *scopes: str) -> None:
        """The searches of the current iteration found `chunks` new chunks in `scopes`."""
        it = self.state.iteration
        self.evidence[it] = self.evidence.get(it, 0) + chunks
        self.scopes |= set(scopes)

    def advance(self, outputs: dict[StepKey, StepOutput] | None = None, seconds: float = 1.0,
                cancel: bool = False, partial_answer: Answer | None = None) -> StepOutcome:
        self.now += seconds
        self.stored.update(outputs or {})
        # as the coordinator reads them: every output of the finished step's iteration
        seen = {k: v for k, v in self.stored.items() if k.iteration == self.step.iteration}
        inp = StepInput(job_id="job-1", done=self.step, outputs=StepOutputs(items=seen),
                        evidence=EvidenceSummary(per_iteration=dict(self.evidence), scopes=sorted(self.scopes),
                                                 sources={"earnings_transcripts": sum(self.evidence.values())}),
                        availability=self.availability, now=self.now, provider="test",
                        provider_revises=self.provider_revises, cancel_requested=cancel,
                        partial_answer=partial_answer)
        before = self.state.model_dump_json()
        out = machine.step(self.state, inp, self.settings)
        assert self.state.model_dump_json() == before, "a step must not change the state it was given"
        self.state, self.step = out.state.model_copy(update={"inflight": list(out.calls)}), out.step
        self.outcomes.append(out)
        return out

    def respond(self, responder: Responder, seconds: float = 1.0, cancel: bool = False,
                partial_answer: Answer | None = None) -> StepOutcome:
        """Answer every call in flight through `responder` (None: the call stores no output) and step."""
        outputs = {}
        for call in self.last.calls:
            out = responder(call, self.state.iteration)
            if out is not None:
                outputs[call.output_key(self.state.iteration)] = out
        return self.advance(outputs, seconds, cancel=cancel, partial_answer=partial_answer)


def event_types(out: StepOutcome) -> list[str]:
    return [e.type for e in out.events]
