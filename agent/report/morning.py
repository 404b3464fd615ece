"""The analysts' morning report for an overnight batch: one self-contained HTML file (figures embedded as
base64 PNG) and a Markdown file beside it whose figures are PNG files in `<stem>_files/`.

Answers, questions, errors and citation excerpts are untrusted text: the HTML escapes all of it and carries a
Content-Security-Policy that allows only the page's own style and script, so even a slip in escaping could not
run a script; the Markdown backslash-escapes punctuation so no link, image or raw HTML can be formed."""
from __future__ import annotations

import base64
import datetime as dt
import hashlib
import html
import re
from pathlib import Path

from agent.models.batch import BatchItem, BatchReport
from agent.models.research import Citation
from agent.report.plots import Plot, all_plots
from agent.report.stats import (
    DESIGN_EARLY_TERMINATION_RATE,
    EARLY_DEFINITION,
    FAILURE_STATUSES,
    NOT_APPLICABLE,
    STATUS_ORDER,
    UNFINISHED_STATUSES,
    ModeStats,
    Totals,
    failure_reason,
    item_mode,
    item_tokens,
    mode_stats,
    totals,
    used_a_model,
)
from agent.settings import Settings

NOT_APPLICABLE_NO_MODEL = f"{NOT_APPLICABLE} (the offline provider uses no model)"
MARKER = re.compile(r"\[(?:10K|N)?\d+\]")
EXCERPT_CHARS = 300
MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|~&])")  # what could form a link, image, code, emphasis, table cell or raw HTML
MD_AUTOLINK = re.compile(r"https?://[^\s<>]+\Z", re.IGNORECASE)  # a URL CommonMark can autolink as it is

# Records each image's decoded width on load (the browser test reads it back from the DOM).
PAGE_SCRIPT = ("window.addEventListener('load',function(){for(const i of document.images){i.dataset.naturalWidth=i.naturalWidth;}"
               "document.body.dataset.loaded='1';});")
PAGE_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f3f3f3}.num{text-align:right}.answer{white-space:pre-wrap;background:#fafafa;border-left:3px solid #1565c0;padding:.5em 1em}
.status-failed,.status-rejected,.status-invalid{color:#c62828}.status-cancelled{color:#757575}.status-unfinished{color:#1565c0}
.figures img{max-width:100%;border:1px solid #eee;margin:.3em}.question{border-top:1px solid #ddd;margin-top:1.2em}
.sources{list-style:none;padding-left:1em}.sources li{margin:.2em 0}.excerpt{color:#555}
"""


def _csp_hash(source: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode() + "'"


CSP = f"default-src 'none'; img-src data:; style-src {_csp_hash(PAGE_STYLE)}; script-src {_csp_hash(PAGE_SCRIPT)}"


# ---- formatting shared by both outputs


def _fmt_time(t: dt.datetime) -> str:
    return t.isoformat(sep=" ", timespec="seconds")


def _fmt_seconds(s: float | None) -> str:
    if s is None:
        return "-"
    if s < 120:
        return f"{s:.1f} s"
    return f"{s / 60:.1f} min" if s < 7200 else f"{s / 3600:.2f} h"


def _fmt_rate(r: float | None) -> str:
    return "-" if r is None else f"{r:.0%}"


def _status_label(item: BatchItem) -> str:
    return f"unfinished ({item.status})" if item.status in UNFINISHED_STATUSES else item.status


def _row_values(item: BatchItem) -> dict[str, str]:
    r = item.result
    prompt, completion = item_tokens(item)
    return {
        "line": str(item.line),
        "status": _status_label(item),
        "mode": item_mode(item) or "-",
        "confidence": f"{r.confidence:.2f}" if r else "-",
        "iterations": str(r.iterations) if r else "-",
        "termination": (r.termination_reason or "-") if r else "-",
        "time": _fmt_seconds(item.seconds),
        "tokens": "-" if not r else f"{prompt:,} / {completion:,}" if used_a_model(item) else NOT_APPLICABLE,
        "cost": "-" if not r else f"${r.cost_usd:.4f}" if used_a_model(item) else NOT_APPLICABLE,
    }


ROW_HEADERS = {"line": "Line", "status": "Status", "mode": "Mode", "confidence": "Confidence", "iterations": "Iterations",
               "termination": "Termination", "time": "Time", "tokens": "Tokens (prompt / completion)", "cost": "Cost"}


def _citation_where(c: Citation) -> str:
    parts = [c.source_type, c.ticker or "", c.period, c.speaker or "", f"Item {c.item}" if c.item else ""]
    return " · ".join(p for p in parts if p)


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 1] + "…"


def _safe_url(url: str | None) -> str | None:
    return url if url and url.lower().startswith(("https://", "http://")) else None


def _totals_rows(t: Totals) -> list[tuple[str, str]]:
    return [
        ("Questions", str(t.questions)),
        ("Prompt tokens", f"{t.prompt_tokens:,}" if t.tokens_apply else NOT_APPLICABLE_NO_MODEL),
        ("Completion tokens", f"{t.completion_tokens:,}" if t.tokens_apply else NOT_APPLICABLE_NO_MODEL),
        ("Cost", f"${t.cost_usd:.4f}" if t.tokens_apply else NOT_APPLICABLE_NO_MODEL),
        ("Wall time (started to finished)", _fmt_seconds(t.wall_seconds)),
        ("Jobs finished (any final status)", str(t.jobs_finished)),
        ("Jobs per hour", "-" if t.jobs_per_hour is None else f"{t.jobs_per_hour:.1f}"),
    ]


MODE_HEADERS = ["Mode", "Completed", "Avg iterations", "Design target", "Max iterations", "Early", "Early rate",
                "Design early rate"]


def _mode_rows(modes: list[ModeStats], t: Totals) -> list[list[str]]:
    target = _fmt_rate(DESIGN_EARLY_TERMINATION_RATE)
    rows = [[m.mode, str(m.completed), f"{m.avg_iterations:.2f}",
             "-" if m.design_avg_iterations is None else f"about {m.design_avg_iterations:.1f}",
             "-" if m.max_iterations is None else str(m.max_iterations), str(m.early), _fmt_rate(m.early_rate), f"about {target}"]
            for m in modes]
    rows.append(["all modes", str(sum(m.completed for m in modes)), "-", "-", "-", str(t.early), _fmt_rate(t.early_rate),
                 f"about {target}"])
    return rows


# ---- HTML


def _h(text: object) -> str:
    return html.escape(str(text), quote=True)


def _html_table(headers: list[str], rows: list[list[str]], num_from: int = 1) -> str:
    head = "".join(f"<th>{_h(x)}</th>" for x in headers)
    body = "".join("<tr>" + "".join(f"<td{' class=num' if k >= num_from else ''}>{_h(v)}</td>" for k, v in enumerate(row)) + "</tr>"
                   for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _html_answer(item: BatchItem) -> str:
    r = item.result
    if r is None or not r.answer:
        return "<p><em>no answer</em></p>"
    known = {c.marker for c in r.citations}

    def link(m: re.Match[str]) -> str:
        marker = m.group(0)
        if marker not in known:
            return marker
        return f'<sup><a href="#q{item.line}-{_h(marker.strip("[]"))}">{_h(marker)}</a></sup>'

    answer = MARKER.sub(link, _h(r.answer))  # markers contain no escapable characters, so escaping first is safe
    sources = ""
    if r.citations:
        items = []
        for c in r.citations:
            url = _safe_url(c.url)
            link_html = f' <a href="{_h(url)}" rel="noreferrer noopener">{_h(url)}</a>' if url else ""
            items.append(f'<li id="q{item.line}-{_h(c.marker.strip("[]"))}"><strong>{_h(c.marker)}</strong> {_h(_citation_where(c))}'
                         f'{link_html}<br><span class="excerpt">“{_h(_excerpt(c.text))}”</span></li>')
        sources = f'<p>Sources</p><ol class="sources">{"".join(items)}</ol>'
    return f'<div class="answer">{answer}</div>{sources}'


def _html_question(item: BatchItem) -> str:
    values = _row_values(item)
    cls = "unfinished" if item.status in UNFINISHED_STATUSES else item.status
    table = _html_table([ROW_HEADERS[k] for k in values if k != "line"], [[v for k, v in values.items() if k != "line"]], num_from=99)
    problem = f'<p class="status-{cls}">Reason: {_h(failure_reason(item))}</p>' if item.status in FAILURE_STATUSES else ""
    return (f'<section class="question" id="q{item.line}"><h3>Line {item.line} — <span class="status-{cls}">{_h(values["status"])}'
            f'</span></h3><p><strong>Question:</strong> {_h(item.question or "(none)")}</p>{table}{problem}{_html_answer(item)}</section>')


def _html_img(plot: Plot) -> str:
    data = base64.b64encode(plot.png).decode()
    return f'<img src="data:image/png;base64,{data}" alt="{_h(plot.title)}" data-plot="{plot.name}" data-has-data="{str(plot.has_data).lower()}">'


def render_html(report: BatchReport, t: Totals, modes: list[ModeStats], plots: list[Plot]) -> str:
    failures = [i for i in report.items if i.status in FAILURE_STATUSES]
    unfinished = [i for i in report.items if i.status in UNFINISHED_STATUSES]
    parts = [
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><meta http-equiv="Content-Security-Policy" content="{CSP}">',
        f"<title>Batch report: {_h(report.name)}</title><style>{PAGE_STYLE}</style><script>{PAGE_SCRIPT}</script></head><body>",
        f"<h1>Batch report: {_h(report.name)}</h1>",
        f"<p>Started {_h(_fmt_time(report.started_at))}, finished {_h(_fmt_time(report.finished_at))}.</p>",
        "<h2>Totals</h2>", _html_table(["Measure", "Value"], [list(r) for r in _totals_rows(t)]),
        "<h2>Status counts</h2>", _html_table(list(STATUS_ORDER), [[str(t.counts[s]) for s in STATUS_ORDER]], num_from=0),
        "<h2>Answer modes</h2>", _html_table(MODE_HEADERS, _mode_rows(modes, t)),
        f"<p>Early termination: {_h(EARLY_DEFINITION)}. The design targets are the figures the product's design documents "
        "state, shown for comparison.</p>",
        '<h2>Figures</h2><div class="figures">', *(_html_img(p) for p in plots), "</div>",
        "<h2>Failures</h2>",
        _html_table(["Line", "Status", "Question", "Reason"], [[str(i.line), i.status, i.question, failure_reason(i)] for i in failures], 99)
        if failures else "<p>None.</p>",
    ]
    if unfinished:
        parts += ["<h2>Unfinished</h2>", _html_table(["Line", "Status", "Question"], [[str(i.line), i.status, i.question] for i in unfinished], 99)]
    parts.append("<h2>Questions</h2>")
    parts += [_html_question(i) for i in report.items] if report.items else ["<p>The batch has no questions.</p>"]
    parts.append("</body></html>")
    return "\n".join(parts)


# ---- Markdown


def _md(text: object) -> str:
    return MD_SPECIAL.sub(r"\\\1", " ".join(str(text).split()))


def _md_table(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(_md(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_md(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _md_question(item: BatchItem) -> str:
    values = _row_values(item)
    out = [f"### Line {item.line} — {_md(values['status'])}", "", f"**Question:** {_md(item.question or '(none)')}", "",
           _md_table([ROW_HEADERS[k] for k in values if k != "line"], [[v for k, v in values.items() if k != "line"]]), ""]
    if item.status in FAILURE_STATUSES:
        out += [f"**Reason:** {_md(failure_reason(item))}", ""]
    r = item.result
    if r is None or not r.answer:
        out += ["*no answer*", ""]
        return "\n".join(out)
    # the answer keeps its line breaks; each line is escaped on its own
    out += ["\n".join("> " + MD_SPECIAL.sub(r"\\\1", line) for line in r.answer.splitlines()), ""]
    if r.citations:
        out += ["**Sources**", ""]
        for c in r.citations:
            url = _safe_url(c.url)
            out.append(f"- **{_md(c.marker)}** {_md(_citation_where(c))}" + (f" <{url}>" if url and MD_AUTOLINK.match(url) else "")
                       + f" — “{_md(_excerpt(c.text))}”")
        out.append("")
    return "\n".join(out)


def render_markdown(report: BatchReport, t: Totals, modes: list[ModeStats], plots: list[Plot], files_dir: str) -> str:
    failures = [i for i in report.items if i.status in FAILURE_STATUSES]
    unfinished = [i for i in report.items if i.status in UNFINISHED_STATUSES]
    out = [f"# Batch report: {_md(report.name)}", "",
           f"Started {_fmt_time(report.started_at)}, finished {_fmt_time(report.finished_at)}.", "",
           "## Totals", "", _md_table(["Measure", "Value"], [list(r) for r in _totals_rows(t)]), "",
           "## Status counts", "", _md_table(list(STATUS_ORDER), [[str(t.counts[s]) for s in STATUS_ORDER]]), "",
           "## Answer modes", "", _md_table(MODE_HEADERS, _mode_rows(modes, t)), "",
           f"Early termination: {_md(EARLY_DEFINITION)}. The design targets are the figures the product's design documents "
           "state, shown for comparison.", "",
           "## Figures", ""]
    out += [f"![{_md(p.title)}]({files_dir}/{p.name}.png)" for p in plots]
    out += ["", "## Failures", ""]
    out += [_md_table(["Line", "Status", "Question", "Reason"], [[str(i.line), i.status, i.question, failure_reason(i)] for i in failures])
            if failures else "None.", ""]
    if unfinished:
        out += ["## Unfinished", "", _md_table(["Line", "Status", "Question"], [[str(i.line), i.status, i.question] for i in unfinished]), ""]
    out += ["## Questions", ""]
    out += [_md_question(i) for i in report.items] if report.items else ["The batch has no questions.", ""]
    return "\n".join(out)


# ---- entry point


def write_report(report: BatchReport, html_path: Path, settings: Settings) -> tuple[Path, Path]:
    """Write the HTML report, the Markdown beside it (same stem) and the Markdown's figures in `<stem>_files/`."""
    html_path = Path(html_path)
    html_path.parent.mkdir(parents=True, exist_ok=True)
    md_path = html_path.with_suffix(".md")
    files_dir = html_path.parent / f"{html_path.stem}_files"
    files_dir.mkdir(exist_ok=True)
    modes = mode_stats(report, settings)
    t = totals(report, modes)
    plots = all_plots(report)
    for p in plots:
        (files_dir / f"{p.name}.png").write_bytes(p.png)
    html_path.write_text(render_html(report, t, modes, plots), encoding="utf-8")
    md_path.write_text(render_markdown(report, t, modes, plots, files_dir.name), encoding="utf-8")
    return html_path, md_path
