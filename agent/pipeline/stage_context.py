"""What a stage module (the 10-K agent's stages, the news report) may read and do within a coordinator step.

`machine.Step` is the one implementation; the stage modules see only this protocol, so they never reach into the
machine, and the machine imports them, not the other way round."""
from __future__ import annotations

from typing import Literal, Protocol

from agent.models.job import JobState, TimedStage
from agent.models.steps import Stage, StepKey, StepOutput, TaskCall
from agent.pipeline.inputs import StepInput, StepOutcome
from agent.settings import Settings

RoundEnd = Literal["no_evidence", "out_of_time", "nothing_new"]


class StageContext(Protocol):
    state: JobState  # the step's own copy of the job's state, changed in place
    inp: StepInput
    settings: Settings
    now: float

    def emit(self, type: str, message: str = "", **data) -> None:
        """An event for the job's stream, published with the step's outcome."""

    def stage_time(self, stage: TimedStage, at: float | None = None) -> None:
        """The time since the stage started (until `at`, default now) counts toward `stage`."""

    def read(self, stage: Stage, round: int | None = None, charged: list[str] | None = None) -> dict[StepKey, StepOutput]:
        """The outputs of `stage` in this iteration, their usage charged to the job (except the `charged` scopes')."""

    def dispatch(self, stage: Stage, calls: list[TaskCall]) -> StepOutcome:
        """The step ends by fanning out `calls`; their outputs come back as `stage`."""

    def search_calls(self) -> list[TaskCall]:
        """The iteration's transcript and news searches."""

    def search_round_ends(self) -> RoundEnd | None:
        """Why the iteration's searches lead to no extraction; None: they lead to it."""

    def after_search(self) -> StepOutcome:
        """The step that follows the iteration's searches."""
