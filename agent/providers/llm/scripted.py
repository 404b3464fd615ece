"""The `scripted` provider, for tests: canned outputs per role (and per iteration for evaluate),
falling back to the extractive provider for anything not scripted.

Script file (JSON): {"plan": {...ResearchPlan...},
                     "evaluate": {"1": {...Evaluation...}, "2": {...}},
                     "evaluate_10k": {"1": {...TenKEvaluation...}},  (keyed by 10-K round)
                     "plan_10k": {...TenKPlan without ticker and fiscal_year...},
                     "fail": {"plan": "ConnectionError: upstream down"},      (every call of the role fails)
                     "fail_first": {"extract": 1},                          (the first N calls fail, then succeed)
                     "revises": true}                                       (compose reworks the answer from feedback)
The calls made per role are counted in a file beside the script, shared by every worker process.
"""
from __future__ import annotations

import builtins
import hashlib
import json
from pathlib import Path

import fasteners

from agent.models.research import Evaluation, ResearchPlan, Usage
from agent.providers.llm.extractive import ExtractiveProvider
from agent.settings import Settings


class ScriptedProvider(ExtractiveProvider):
    name = "scripted"

    def __init__(self, path: Path):
        self.path = path

    @property
    def cache_namespace(self) -> str:
        """A changed script must not be answered from responses cached under the old one."""
        text = self.path.read_text() if self.path.exists() else ""
        return "scripted:" + hashlib.sha256(text.encode()).hexdigest()

    @property
    def script(self) -> dict:
        # read on every call, so one long-lived test worker can serve differently scripted jobs
        return json.loads(self.path.read_text()) if self.path.exists() else {}

    @classmethod
    def from_settings(cls, settings: Settings) -> ScriptedProvider:
        if not settings.llm_script_path:
            raise ValueError("FINAGENT_LLM_SCRIPT_PATH must point to a script file for the scripted provider")
        return cls(Path(settings.llm_script_path))

    def _maybe_fail(self, role: str) -> None:
        script = self.script
        spec = script.get("fail", {}).get(role)
        if spec:
            name, _, message = spec.partition(":")
            raise getattr(builtins, name.strip(), RuntimeError)(message.strip())
        first = int(script.get("fail_first", {}).get(role, 0))
        if first and self._count(role) <= first:
            raise ConnectionError(f"scripted outage of {role}")

    def _count(self, role: str) -> int:
        """This call's number among the role's calls (1-based), across processes."""
        counts = self.path.with_suffix(".calls.json")
        with fasteners.InterProcessLock(str(self.path.with_suffix(".lock"))):
            data = json.loads(counts.read_text()) if counts.exists() else {}
            data[role] = data.get(role, 0) + 1
            counts.write_text(json.dumps(data))
        return data[role]

    def plan(self, req):
        self._maybe_fail("plan")
        if "plan" in self.script:
            return ResearchPlan.model_validate(self.script["plan"]), Usage(prompt=100, completion=50)
        return super().plan(req)

    def evaluate(self, req):
        self._maybe_fail("evaluate")
        scripted = self.script.get("evaluate", {}).get(str(req.iteration))
        if scripted is not None:
            return Evaluation.model_validate(scripted | {"scope": req.scope}), Usage(prompt=200, completion=80)
        return super().evaluate(req)

    def plan_10k(self, req):
        self._maybe_fail("plan_10k")
        scripted = self.script.get("plan_10k")
        if scripted is not None:
            from agent.models.tenk import TenKPlan

            return TenKPlan.model_validate(scripted | {"ticker": req.ticker, "fiscal_year": req.fiscal_year}), \
                Usage(prompt=120, completion=60)
        return super().plan_10k(req)

    def evaluate_10k(self, req):
        self._maybe_fail("evaluate_10k")
        scripted = self.script.get("evaluate_10k", {}).get(str(req.round))
        if scripted is not None:
            from agent.models.tenk import TenKEvaluation

            return TenKEvaluation.model_validate(scripted), Usage(prompt=150, completion=40)
        return super().evaluate_10k(req)

    def extract(self, req):
        self._maybe_fail("extract")
        return super().extract(req)

    @property
    def revises_answers(self) -> bool:
        """`"revises": true` in the script stands in for a model that reworks its answer from feedback."""
        return bool(self.script.get("revises", False))

    def compose(self, req):
        self._maybe_fail("compose")
        answer, usage = super().compose(req)
        if req.feedback and self.revises_answers:  # the rework a model would make: the answer changes with the feedback
            answer = answer.model_copy(update={"text": f"{answer.text}\n\n{req.feedback}"})
        return answer, usage
