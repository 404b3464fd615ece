"""`finagent eval transcripts`: retrieval recall of numeric facts stated in earnings calls, and (`--answers`) whether
`finagent ask`'s answer states each fact's figure with a citation that holds it."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.table import Table

from agent.ingest.failures import IngestError
from agent.ingest.runner import FanOut
from ops.eval.transcript_facts import Fact, extract_facts, transcript_files
from ops.eval.transcripts_eval import (
    AnswerJudgement,
    AnswerRecord,
    RetrievalResult,
    answer_record,
    halves,
    judge_answer,
    retrieval_rank,
    summarise_answers,
    summarise_retrieval,
)
from tasks.ingest import EmbedFanOut

err = Console(stderr=True)


def _fail(message: str, code: int = 2) -> NoReturn:
    typer.secho(message, err=True, fg="red")  # one plain line, never wrapped
    raise typer.Exit(code=code)


def _ask(ctx, facts: list[Fact], timeout_s: float, quiet: bool) -> tuple[list[AnswerRecord], list[AnswerJudgement], list[dict]]:
    from agent.models.job import JobRequest
    from ops.cli.ask import submit_and_follow

    records, judgements, details = [], [], []
    for i, fact in enumerate(facts, 1):
        job, _ = submit_and_follow(ctx, JobRequest(question=fact.question), timeout_s)
        judgement = judge_answer(fact, job.result)
        records.append(answer_record(fact, job.result, judgement))
        judgements.append(judgement)
        details.append({"id": fact.id, "question": fact.question, "figure": fact.figure, "kind": fact.kind,
                        "correct": judgement.correct, "failure_kind": judgement.failure_kind, "lead": judgement.lead[:300],
                        "confidence": job.result.confidence if job.result else None})
        if not quiet:
            mark = "ok" if judgement.correct else judgement.failure_kind
            err.print(f"[{i}/{len(facts)}] {mark:<22} {records[-1].confidence:.2f}  {fact.question}", markup=False, highlight=False)
    return records, judgements, details


def run_eval(ctx, files: list[Path], facts: list[Fact], header: dict[str, Any], answers: bool, fanout: FanOut | None = None,
             timeout_s: float = 300, quiet: bool = True) -> dict[str, Any]:
    """Ingest the calls (files already ingested unchanged are skipped), then measure retrieval and, with `answers`,
    the answers; per-fact answer records go to <data_dir>/eval/transcripts-answers.jsonl."""
    from agent.ingest.runner import ingest

    report = ingest(ctx, "transcript", files, fanout=fanout, quiet=True)
    if report.errors:
        raise ValueError("; ".join(f"{f.path}: {f.reason}" for f in report.errors[:3]))
    retrieved: list[RetrievalResult] = [retrieval_rank(ctx, f) for f in facts]
    split = halves(facts)
    out: dict[str, Any] = header | {
        "facts": len(facts), "embedding_provider": ctx.settings.embedding_provider, "llm_provider": ctx.settings.llm_provider,
        "retrieval": summarise_retrieval(retrieved).model_dump(),
        "retrieval_by_half": {h: summarise_retrieval([r for r in retrieved if r.fact_id in {f.id for f in fs}]).model_dump()
                              for h, fs in split.items()},
    }
    if answers:
        records, judgements, details = _ask(ctx, facts, timeout_s, quiet=quiet)
        path = ctx.settings.data_dir / "eval" / "transcripts-answers.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(r.model_dump_json() + "\n" for r in records))
        out["answers"] = summarise_answers(records, judgements).model_dump()
        out["answers_by_half"] = {}
        for h, fs in split.items():
            ids = {f.id for f in fs}
            out["answers_by_half"][h] = summarise_answers([r for r in records if r.id in ids],
                                                          [j for j in judgements if j.fact_id in ids]).model_dump()
        out["answer_records"] = str(path)
        out["answer_details"] = details
    return out


def eval_transcripts(
    data: Path = typer.Option(Path("../shared/data/transcripts"), "--data", help="folder of {TICKER}_{YYYY}_q{N}.json calls"),
    per_ticker: int = typer.Option(5, "--per-ticker", min=1, help="facts sampled per ticker"),
    seed: int = typer.Option(12, "--seed", help="sampling seed (same files and seed: same facts)"),
    answers: bool = typer.Option(False, "--answers", help="also ask each fact's question through the Celery pipeline"),
    inline: bool = typer.Option(False, "--inline", help="embed in this process instead of on the workers when ingesting"),
    facts_out: Path | None = typer.Option(None, "--facts-out", help="write the sampled facts here as JSONL"),
    timeout_s: float = typer.Option(300, "--timeout", help="seconds to wait for each answer"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
):
    """Facts stated in earnings calls: is the chunk that states each in the top 15 of a search under its ticker and
    quarter (recall@5, @15, rank distribution)? With --answers: does the answer state the figure and cite it?"""
    from ops.local.bootstrap import bootstrap

    try:
        files = transcript_files(data)
    except FileNotFoundError as exc:
        _fail(str(exc))
    try:
        extraction = extract_facts(files, per_ticker=per_ticker, seed=seed)
    except IngestError as exc:
        _fail(f"{exc.path}: {exc.reason}")
    facts = extraction.facts
    if not facts:
        _fail(f"no facts found in {len(files)} transcript files under {data}")
    if facts_out:
        facts_out.write_text("".join(f.model_dump_json() + "\n" for f in facts))

    ctx = bootstrap(workers=answers or not inline)
    try:
        out = run_eval(ctx, files, facts, extraction.model_dump(exclude={"facts"}) | {"seed": seed, "per_ticker": per_ticker},
                       answers=answers, fanout=None if inline else EmbedFanOut, timeout_s=timeout_s, quiet=as_json)
    except ValueError as exc:
        _fail(str(exc))
    if as_json:
        typer.echo(json.dumps(out, indent=2))
        return
    _print(out)


def _print(out: dict[str, Any]) -> None:
    con = Console()
    con.print(f"{out['facts']} facts from {out['calls']} calls ({out['candidates']} candidate sentences, "
              f"{out['ambiguous_groups']} ambiguous groups left out); embedder {out['embedding_provider']}, "
              f"provider {out['llm_provider']}")
    table = Table("facts", "half", "recall@5", "recall@15", "not in corpus")
    for name, r in [("all", out["retrieval"]), *out["retrieval_by_half"].items()]:
        table.add_row(str(r["facts"]), name, f"{r['recall_at_5']:.3f}", f"{r['recall_at_15']:.3f}", str(r["not_in_corpus"]))
    con.print(table)
    con.print("rank distribution: " + ", ".join(f"{k}: {v}" for k, v in out["retrieval"]["ranks"].items()))
    if "answers" in out:
        table = Table("facts", "half", "correct", "stated anywhere", "conf. right", "conf. wrong", "AUROC", "iterations", "failures")
        for name, a in [("all", out["answers"]), *out["answers_by_half"].items()]:
            table.add_row(str(a["facts"]), name, f"{a['correct_share']:.3f}", f"{a['stated_anywhere_share']:.3f}",
                          str(a["mean_confidence_right"]), str(a["mean_confidence_wrong"]), str(a["auroc"]),
                          str(a["mean_iterations"]), ", ".join(f"{k} {v}" for k, v in a["failures"].items()))
        con.print(table)
        con.print(f"per-fact records: {out['answer_records']}")
