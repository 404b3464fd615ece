"""The 10-K agent as coordinator stages (seed 001, stage 2.6): plan sub-questions per company,
retrieve them in one chord of at most 6 tasks, answer and evaluate per company, replan from the
missing information until quality >= 0.90 or 5 rounds."""
from __future__ import annotations

from agent.pipeline import jobstore
from agent.pipeline.budget import out_of_time
from agent.pipeline.outcome import StepOutcome, TaskCall
from agent.retrieval.availability import available_periods
from agent.tenk.models import TenKEvaluation, TenKPlan


class TenKStages:
    def has_10k(self) -> bool:
        ttl = self.ctx.settings.quarter_cache_ttl_s
        return any(available_periods(self.ctx.pool, t, "10k", self.ctx.redis, ttl) for t in self.state.plan.tickers)

    def tenk_pending(self) -> bool:
        return bool(self.state.search_plan.tenk) and not self.state.tenk.get("done")

    def _targets(self) -> list[tuple[str, int]]:
        return [(tp.ticker, int(tp.periods[0].removeprefix("FY"))) for tp in self.state.search_plan.tenk if tp.periods]

    def _key(self, stage: str, ticker: str = "") -> str:
        return f"{self.state.iteration}:tenk{self.state.tenk['round']}:{stage}" + (f":{ticker}" if ticker else "")

    def start_tenk(self) -> StepOutcome:
        self.state.tenk = {"round": 1, "quality": {}, "missing": {}, "open": [t for t, _ in self._targets()]}
        return self._tenk_plan_calls()

    def _tenk_plan_calls(self) -> StepOutcome:
        tk = self.state.tenk
        calls = [TaskCall(task="tenk_plan", args={"ticker": t, "fiscal_year": fy, "round": tk["round"],
                                                  "missing_info": tk["missing"].get(t, [])})
                 for t, fy in self._targets() if t in tk["open"]]
        return self._dispatch("tenk_plan", calls)

    def after_tenk_plan(self) -> StepOutcome:
        self._stage_time("tenk")
        tk = self.state.tenk
        plans = {}
        for key, out in self._outputs(self._key("plan")).items():
            if "plan" in out:
                plans[key.rsplit(":", 1)[1]] = TenKPlan.model_validate(out["plan"])
            else:
                self.emit("error", f"10-K planning failed: {out.get('error')}", step="tenk_plan", error_class=out.get("error_class"))
        if not plans:
            tk["done"] = True
            return self._dispatch_search()
        limit = self.ctx.settings.tenk_parallelism
        assignments: list[list[list]] = [[] for _ in range(limit)]
        n = 0
        done = tk.setdefault("retrieved", {})
        for ticker, plan in plans.items():
            for sq in plan.sub_questions:
                signature = f"{sq.kind}|{'/'.join(sq.items)}|{sq.keywords}"
                if signature in done.get(ticker, []):
                    continue  # a replan repeats the sub-questions it keeps: their evidence is already in
                done.setdefault(ticker, []).append(signature)
                assignments[n % limit].append([ticker, sq.id])
                n += 1
        self.emit("tenk_search", f"10-K round {tk['round']}: {n} sub-questions",
                  phase="plan", round=tk["round"],
                  sub_questions={t: [f"[{q.kind}] Item {'/'.join(q.items)}: {q.text}" for q in p.sub_questions] for t, p in plans.items()})
        calls = [TaskCall(task="tenk_retrieve", args={"round": tk["round"], "slot": i, "assignments": a})
                 for i, a in enumerate(assignments) if a]
        if not calls:
            return self.after_tenk_retrieve()
        return self._dispatch("tenk_retrieve", calls)

    def after_tenk_retrieve(self) -> StepOutcome:
        self._stage_time("tenk")
        tk = self.state.tenk
        added = sum(o.get("added", 0) for o in self._outputs(self._key("retrieve")).values())
        self.emit("tenk_search", f"10-K round {tk['round']}: {added} new passages and tables", phase="retrieval",
                  round=tk["round"], chunks_added=added)
        calls = [TaskCall(task="tenk_answer", args={"ticker": t, "round": tk["round"]}) for t in tk["open"]]
        return self._dispatch("tenk_answer", calls)

    def after_tenk_answer(self) -> StepOutcome:
        self._stage_time("tenk")
        calls = [TaskCall(task="tenk_evaluate", args={"ticker": t, "round": self.state.tenk["round"]})
                 for t in self.state.tenk["open"]]
        return self._dispatch("tenk_evaluate", calls)

    def after_tenk_evaluate(self) -> StepOutcome:
        self._stage_time("tenk")
        tk, s = self.state.tenk, self.ctx.settings
        for key, out in self._outputs(self._key("evaluate")).items():
            ticker = key.rsplit(":", 1)[1]
            if "evaluation" not in out:
                continue
            ev = TenKEvaluation.model_validate(out["evaluation"])
            tk["quality"][ticker], tk["missing"][ticker] = ev.quality, ev.missing_info
        tk["open"] = [t for t in tk["open"] if tk["quality"].get(t, 0) < s.tenk_quality_threshold]
        replan = bool(tk["open"]) and tk["round"] < s.tenk_max_iterations and not out_of_time(self.state)
        self.emit("tenk_search", f"10-K round {tk['round']}: quality " + ", ".join(f"{t} {q:.0%}" for t, q in tk["quality"].items()),
                  phase="evaluation", round=tk["round"], quality=tk["quality"], missing_info=tk["missing"], will_replan=replan)
        self.state.trace(f"10-K round {tk['round']}: quality {tk['quality']}; {'replanning' if replan else 'done'}")
        if replan:
            tk["round"] += 1
            return self._tenk_plan_calls()
        tk["done"] = True
        return self._dispatch_search()


def latest_tenk_answer(pool, job_id: str, ticker: str) -> dict | None:
    """The latest 10-K answer for a company (any iteration, last round), used as its 10-K findings."""
    outs = jobstore.get_outputs(pool, job_id, "")
    answers = []
    for key, out in outs.items():
        parts = key.split(":")
        if len(parts) == 4 and parts[1].startswith("tenk") and parts[2] == "answer" and parts[3] == ticker and "answer" in out:
            answers.append(((int(parts[0]), int(parts[1].removeprefix("tenk"))), out))
    return max(answers, key=lambda kv: kv[0])[1] if answers else None
