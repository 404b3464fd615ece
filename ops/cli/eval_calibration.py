"""`finagent eval calibration`: is the computed confidence meaningful? Reads the per-question records every answer
eval writes under DATA_DIR/eval/ (FinanceBench answers, transcript-facts answers), bins correctness by the job's
confidence (a reliability table and plot), and shows per answer mode the average iterations and the early-termination
rate beside the design's figures."""
from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from agent.infra.extras import require
from agent.report.stats import DESIGN_AVG_ITERATIONS, DESIGN_EARLY_TERMINATION_RATE
from ops.cli.eval_financebench_answers import ROOT, fail
from ops.eval.calibration import EARLY_DEFINITION, EvalRecord, ModeRow, Reliability, WrongVsThreshold

RECORD_FILES = ("financebench-answers.jsonl", "transcripts-answers.jsonl")
PLOT = ROOT / "docs" / "quality-calibration.png"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def _num(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def reliability_rows(rel: Reliability) -> list[tuple[str, ...]]:
    return [(f"{b.low:.1f}-{b.high:.1f}", str(b.questions), str(b.correct), _pct(b.accuracy), _num(b.mean_confidence))
            for b in rel.bins]


def mode_table_rows(rows: list[ModeRow]) -> list[tuple[str, ...]]:
    return [(r.mode, str(r.completed), _num(r.avg_iterations), _num(r.design_avg_iterations, 1), _pct(r.early_rate),
             _pct(DESIGN_EARLY_TERMINATION_RATE)) for r in rows]


REL_HEADER = ("confidence", "questions", "correct", "accuracy", "mean confidence")
MODE_HEADER = ("mode", "completed", "avg iterations", "design", "early termination", "design")


def reliability_plot(rel: Reliability, title: str) -> bytes:
    """Accuracy per confidence bin against the diagonal, with each bin's question count."""
    require("matplotlib", "report")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.2), layout="constrained")
    ax = fig.add_subplot()
    centres = [(b.low + b.high) / 2 for b in rel.bins]
    width = rel.bins[0].high - rel.bins[0].low if rel.bins else 0.2
    ax.bar(centres, [b.accuracy or 0 for b in rel.bins], width=width * 0.9, color="#1565c0", label="share correct")
    ax.plot([0, 1], [0, 1], "--", color="#757575", label="perfect calibration")
    for c, b in zip(centres, rel.bins):
        ax.text(c, (b.accuracy or 0) + 0.02, f"n={b.questions}", ha="center", fontsize="small")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.1)
    ax.set_xlabel("job confidence")
    ax.set_ylabel("share of answers correct")
    ax.set_title(title)
    ax.legend(loc="upper left", fontsize="small")
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


def _sources(records: list[EvalRecord]) -> str:
    counts: dict[str, int] = {}
    for r in records:
        counts[r.source] = counts.get(r.source, 0) + 1
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))


def calibration(
    records: Optional[list[Path]] = typer.Option(None, "--records", help="records JSONL files (default: DATA_DIR/eval/*-answers.jsonl)"),
    bins: int = typer.Option(5, "--bins", min=2, max=20, help="confidence bins"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
    write_docs: bool = typer.Option(False, "--write-docs", help="write the Calibration section of docs/quality.md and its plot"),
):
    """Correctness binned by the job's computed confidence, and iterations and early termination per answer mode."""
    from agent.settings import get_settings
    from ops.eval.calibration import (
        RecordsFileError,
        load_records,
        mode_rows,
        overall_early_rate,
        reliability,
        wrong_vs_threshold,
    )

    settings = get_settings()
    paths = list(records or [settings.data_dir / "eval" / name for name in RECORD_FILES])
    present = [p for p in paths if p.is_file()]
    if records and len(present) < len(paths):
        fail(f"{next(p for p in paths if not p.is_file())}: no such records file")
    if not present:
        fail(f"no records under {settings.data_dir / 'eval'}: run `finagent eval financebench --answers` (or the transcripts "
             "answer check) first")
    loaded: list[EvalRecord] = []
    try:
        for p in present:
            loaded += load_records(p)
    except RecordsFileError as exc:
        fail(str(exc))
    if not loaded:
        fail(f"{', '.join(map(str, present))}: no records")
    rel = reliability(loaded, bins)
    modes = mode_rows(loaded, DESIGN_AVG_ITERATIONS, {m.value: cfg.max_iterations for m, cfg in settings.modes.items()})
    early = overall_early_rate(modes)
    wrong = wrong_vs_threshold(loaded, {m.value: cfg.confidence_threshold for m, cfg in settings.modes.items()})
    png = reliability_plot(rel, f"Reliability: {_sources(loaded)}")
    plot_path = PLOT if write_docs else settings.data_dir / "eval" / "calibration.png"
    plot_path.parent.mkdir(parents=True, exist_ok=True)
    plot_path.write_bytes(png)
    if as_json:
        typer.echo(json.dumps({"records": len(loaded), "sources": _sources(loaded), "reliability": rel.model_dump(),
                               "wrong_vs_threshold": wrong.model_dump(),
                               "modes": [m.model_dump() for m in modes], "early_termination_rate": early,
                               "design_early_termination_rate": DESIGN_EARLY_TERMINATION_RATE, "plot": str(plot_path)}, indent=2))
    else:
        _print(loaded, rel, wrong, modes, early, plot_path)
    if write_docs:
        from ops.eval.quality_docs import QUALITY_DOC, write_section

        write_section(QUALITY_DOC, "## Calibration", calibration_markdown(loaded, rel, modes, early, PLOT.name, bins,
                                                                          [p.name for p in present], wrong))


def _print(records: list[EvalRecord], rel: Reliability, wrong: WrongVsThreshold, modes: list[ModeRow], early: float | None,
           plot: Path) -> None:
    console = Console()
    console.print(f"{len(records)} records ({_sources(records)}); {rel.scored} scored, {rel.unscored} unscored")
    table = Table(*REL_HEADER, title="reliability")
    for row in reliability_rows(rel):
        table.add_row(*row)
    console.print(table)
    console.print(f"ECE {_num(rel.ece)}; mean confidence of right answers {_num(rel.mean_confidence_correct)}, of wrong ones "
                  f"{_num(rel.mean_confidence_wrong)}; AUROC {_num(rel.auroc)}")
    console.print(wrong_sentence(wrong))
    table = Table(*MODE_HEADER, title="iterations and early termination per mode")
    for row in mode_table_rows(modes):
        table.add_row(*row)
    console.print(table)
    console.print(f"early termination overall {_pct(early)} (design about {_pct(DESIGN_EARLY_TERMINATION_RATE)}); plot: {plot}")


def _md_table(rows: list[tuple[str, ...]], header: tuple[str, ...]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def wrong_sentence(wrong: WrongVsThreshold) -> str:
    if wrong.mean_margin is None:
        return "No wrong answer with a known answer mode."
    per_mode = "; ".join(f"{m.mode} {m.wrong} at {m.mean_confidence:.2f} (threshold {m.threshold:.2f})" for m in wrong.modes)
    return (f"Wrong answers against their mode's confidence threshold: {per_mode}; on average "
            f"{abs(wrong.mean_margin):.2f} {'below' if wrong.below else 'above'} it.")


def calibration_markdown(records: list[EvalRecord], rel: Reliability, modes: list[ModeRow], early: float | None,
                         plot_name: str, bins: int, files: list[str], wrong: WrongVsThreshold) -> str:
    return "\n".join([
        "## Calibration", "", "`finagent eval calibration --write-docs`", "",
        f"Records: {', '.join(f'`{f}`' for f in files)}. "
        f"{len(records)} evaluated questions ({_sources(records)}), {rel.scored} answered (completed jobs) with a verdict. Correctness binned by the "
        f"job's computed confidence ({bins} bins):", "",
        _md_table(reliability_rows(rel), REL_HEADER), "",
        f"Expected calibration error {_num(rel.ece)}. Mean confidence of right answers {_num(rel.mean_confidence_correct)}, "
        f"of wrong ones {_num(rel.mean_confidence_wrong)}; AUROC {_num(rel.auroc)} (0.5: the confidence does not separate "
        "right answers from wrong ones).", "",
        wrong_sentence(wrong), "",
        f"![reliability]({plot_name})", "",
        f"Iterations and early termination per answer mode, beside the design's figures ({EARLY_DEFINITION}):", "",
        _md_table(mode_table_rows(modes), MODE_HEADER), "",
        f"Early termination overall: {_pct(early)} (design: about {_pct(DESIGN_EARLY_TERMINATION_RATE)}).",
    ])
