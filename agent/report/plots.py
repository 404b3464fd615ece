"""The morning report's figures as PNG bytes, drawn with matplotlib's Agg canvas (no display, no pyplot state)."""
from __future__ import annotations

import io

from pydantic import BaseModel

from agent.infra.extras import MissingExtra
from agent.models.batch import BatchReport
from agent.report.stats import DESIGN_AVG_ITERATIONS, completed_by_mode

try:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator
except ModuleNotFoundError as exc:
    raise MissingExtra("report", "matplotlib") from exc

STATUS_COLOURS = {"completed": "#2e7d32", "failed": "#c62828", "rejected": "#ef6c00", "cancelled": "#757575",
                  "invalid": "#6a1b9a", "queued": "#90a4ae", "running": "#1565c0"}


class Plot(BaseModel):
    name: str  # file stem, e.g. 'confidence'
    title: str
    png: bytes
    has_data: bool


def _render(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


def _no_data(fig: Figure, title: str) -> bytes:
    ax = fig.add_subplot()
    ax.set_title(title)
    ax.text(0.5, 0.5, "no data", ha="center", va="center", fontsize=16, color="#757575", transform=ax.transAxes)
    ax.set_axis_off()
    return _render(fig)


def confidence_histogram(report: BatchReport) -> Plot:
    title = "Confidence of completed answers"
    values = [i.result.confidence for i in report.items if i.status == "completed" and i.result is not None]
    fig = Figure(figsize=(6.4, 3.6), layout="constrained")
    if not values:
        return Plot(name="confidence", title=title, png=_no_data(fig, title), has_data=False)
    ax = fig.add_subplot()
    ax.hist(values, bins=[b / 10 for b in range(11)], color="#1565c0", edgecolor="white")
    ax.set_xlim(0, 1)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("confidence")
    ax.set_ylabel("questions")
    ax.set_title(title)
    return Plot(name="confidence", title=title, png=_render(fig), has_data=True)


def time_per_question(report: BatchReport) -> Plot:
    title = "Time per question"
    timed = [i for i in report.items if i.seconds is not None]
    fig = Figure(figsize=(6.4, 3.6), layout="constrained")
    if not timed:
        return Plot(name="time", title=title, png=_no_data(fig, title), has_data=False)
    ax = fig.add_subplot()
    ax.bar([str(i.line) for i in timed], [i.seconds or 0.0 for i in timed], color=[STATUS_COLOURS[i.status] for i in timed])
    present = dict.fromkeys(i.status for i in timed)  # one legend entry per status present, in order seen
    ax.legend(handles=[Patch(color=STATUS_COLOURS[s], label=s) for s in present], fontsize="small")
    ax.set_xlabel("line")
    ax.set_ylabel("seconds")
    ax.set_title(title)
    if len(timed) > 30:  # line labels would overlap
        ax.set_xticks([])
    return Plot(name="time", title=title, png=_render(fig), has_data=True)


def iterations_per_mode(report: BatchReport) -> Plot:
    title = "Iterations per answer mode (completed)"
    groups = completed_by_mode(report)
    fig = Figure(figsize=(6.4, 3.6), layout="constrained")
    if not groups:
        return Plot(name="iterations", title=title, png=_no_data(fig, title), has_data=False)
    modes = [m for m in DESIGN_AVG_ITERATIONS if m in groups] + sorted(m for m in groups if m not in DESIGN_AVG_ITERATIONS)
    ax = fig.add_subplot()
    averages = [sum(i.result.iterations for i in groups[m] if i.result) / len(groups[m]) for m in modes]
    ax.bar(modes, averages, color="#90caf9", label="average")
    for x, mode in enumerate(modes):
        points = [i.result.iterations for i in groups[mode] if i.result]
        spread = [x + (k % 7 - 3) * 0.04 for k in range(len(points))]  # fixed jitter so equal values stay visible
        ax.scatter(spread, points, s=12, color="#0d47a1", zorder=3, label="job" if x == 0 else None)
    targets = [(x, DESIGN_AVG_ITERATIONS[m]) for x, m in enumerate(modes) if m in DESIGN_AVG_ITERATIONS]
    if targets:
        ax.scatter([t[0] for t in targets], [t[1] for t in targets], marker="_", s=900, color="#c62828", zorder=4,
                   label="design target")
    ax.set_ylabel("iterations")
    ax.set_title(title)
    ax.legend(fontsize="small")
    return Plot(name="iterations", title=title, png=_render(fig), has_data=True)


def all_plots(report: BatchReport) -> list[Plot]:
    return [confidence_histogram(report), time_per_question(report), iterations_per_mode(report)]
