"""The morning report: per-question rows, failures with reasons, the per-mode table beside the design targets,
totals, escaping of untrusted answers, and batches with nothing (or nothing good) in them."""
from __future__ import annotations

import base64
import datetime as dt
import io
import re
from pathlib import Path

import pytest
from matplotlib.image import imread

from agent.models.batch import BatchItem, BatchReport
from agent.report.morning import write_report
from agent.report.stats import DESIGN_AVG_ITERATIONS, DESIGN_EARLY_TERMINATION_RATE, mode_stats, totals
from agent.settings import Settings
from tests.support.report_fixtures import MALICIOUS, STARTED, result, sample_batch

SETTINGS = Settings(_env_file=None)


@pytest.fixture
def written(tmp_path: Path) -> tuple[str, str, Path]:
    html_path, md_path = write_report(sample_batch(), tmp_path / "out" / "night.html", SETTINGS)
    return html_path.read_text(), md_path.read_text(), tmp_path / "out"


def _md_section(md: str, title: str) -> str:
    return md.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_paths_and_files(written: tuple[str, str, Path]) -> None:
    _, md, out = written
    assert (out / "night.html").is_file() and (out / "night.md").is_file()
    for name in ("confidence", "time", "iterations"):
        png = out / "night_files" / f"{name}.png"
        assert png.read_bytes().startswith(b"\x89PNG")
        assert f"](night_files/{name}.png)" in md


def test_totals_are_computed() -> None:
    report = sample_batch()
    t = totals(report, mode_stats(report, SETTINGS))
    assert (t.prompt_tokens, t.completion_tokens) == (11000, 1650)
    assert t.cost_usd == pytest.approx(0.111)
    assert t.wall_seconds == 7200
    assert t.jobs_finished == 7  # five completed, one failed, one rejected: the invalid line and the queued job are not
    assert t.jobs_per_hour == pytest.approx(3.5)
    assert t.counts == {"completed": 5, "failed": 1, "rejected": 1, "cancelled": 0, "invalid": 1, "queued": 1, "running": 0}
    assert (t.early, t.early_rate) == (3, pytest.approx(0.6))


def test_totals_rendered(written: tuple[str, str, Path]) -> None:
    html, md, _ = written
    totals_md = _md_section(md, "Totals")
    for row in ("| Prompt tokens | 11,000 |", "| Completion tokens | 1,650 |", "| Cost | $0.1110 |", "| Wall time (started to finished) | 2.00 h |",
                "| Jobs per hour | 3.5 |", "| Questions | 9 |"):
        assert row in totals_md
    assert "| 5 | 1 | 1 | 0 | 1 | 1 | 0 |" in _md_section(md, "Status counts")
    assert "<td class=num>11,000</td>" in html and "<td class=num>$0.1110</td>" in html


def test_mode_table_with_design_targets(written: tuple[str, str, Path]) -> None:
    html, md, _ = written
    table = _md_section(md, "Answer modes")
    # direct: 1 and 2 iterations of max 2 -> one early; standard: 2 and 3 of max 3; detailed: 3 of max 4
    assert "| direct | 2 | 1.50 | about 1.3 | 2 | 1 | 50% | about 65% |" in table
    assert "| standard | 2 | 2.50 | about 2.1 | 3 | 1 | 50% | about 65% |" in table
    assert "| detailed | 1 | 3.00 | about 2.8 | 4 | 1 | 100% | about 65% |" in table
    assert "| all modes | 5 | - | - | - | 3 | 60% | about 65% |" in table
    assert "fewer iterations than its answer mode's max\\_iterations" in table  # the definition is stated
    assert DESIGN_AVG_ITERATIONS == {"direct": 1.3, "standard": 2.1, "detailed": 2.8} and DESIGN_EARLY_TERMINATION_RATE == 0.65
    assert "<td class=num>about 2.1</td>" in html


def test_early_uses_the_settings_limit() -> None:
    report = sample_batch()
    tighter = Settings(_env_file=None, modes={"direct": {"max_iterations": 1, "max_tokens": 2000, "confidence_threshold": 0.7},
                                              "standard": {"max_iterations": 3, "max_tokens": 6000, "confidence_threshold": 0.8},
                                              "detailed": {"max_iterations": 4, "max_tokens": 16000, "confidence_threshold": 0.9},
                                              "deep_search": {"max_iterations": 10, "max_tokens": 20000, "confidence_threshold": 0.95}})
    direct = next(m for m in mode_stats(report, tighter) if m.mode == "direct")
    assert (direct.max_iterations, direct.early, direct.early_rate) == (1, 0, 0.0)


def test_per_question_rows(written: tuple[str, str, Path]) -> None:
    html, md, _ = written
    assert "| completed | direct | 0.78 | 1 | confidence\\_reached | 30.0 s | 1,000 / 100 | $0.0020 |" in md
    assert "| completed | detailed | 0.93 | 3 | confidence\\_reached | 6.7 min | 4,000 / 700 | $0.0600 |" in md
    assert "### Line 9 — unfinished (queued)" in md
    for line in range(1, 10):
        assert f'<section class="question" id="q{line}">' in html
    assert "<td>unfinished (queued)</td>" in html


def test_citations_rendered(written: tuple[str, str, Path]) -> None:
    html, md, _ = written
    # markers link to their source entry; the entry says where the passage is from and quotes it
    assert '<sup><a href="#q1-1">[1]</a></sup>' in html and '<sup><a href="#q3-10K1">[10K1]</a></sup>' in html
    assert '<li id="q1-1"><strong>[1]</strong> transcript · WIDG · 2025 Q3 · CFO' in html
    assert "We expanded gross margin to 41 percent this quarter." in html
    assert '<a href="https://example.com/call" rel="noreferrer noopener">' in html
    assert '<li id="q3-10K1"><strong>[10K1]</strong> 10k · WIDG · FY2024 · Item 1A' in html
    assert "> Gross margin widened to 41% \\[1\\], helped by pricing \\[2\\]." in md
    assert "- **\\[2\\]** transcript · WIDG · 2025 Q3 <https://example.com/call> — “Pricing actions more than offset input costs.”" in md


def test_failures_with_reasons(written: tuple[str, str, Path]) -> None:
    html, md, _ = written
    failures = _md_section(md, "Failures")
    assert "| 6 | failed | What did the airline say about fuel? | LLM provider unavailable after 3 retries |" in failures
    assert "| 7 | rejected | Tell me about ZZZZ | unknown ticker ZZZZ |" in failures  # no error: the termination reason
    assert "| 8 | invalid |  | line 8: question is too short (min 3 characters) |" in failures
    assert "| 1 |" not in failures and "| 9 |" not in failures
    assert "| 9 | queued | Still waiting on this one |" in _md_section(md, "Unfinished")
    assert "<td>LLM provider unavailable after 3 retries</td>" in html


def test_untrusted_text_is_escaped(written: tuple[str, str, Path]) -> None:
    html, md, _ = written
    assert MALICIOUS not in html and "<script>document.title" not in html
    assert "&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;" in html
    assert "<img src=x" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "javascript:" not in html  # an unsafe URL is dropped, not linked
    assert re.findall(r"<script>", html) == ["<script>"]  # only the page's own probe script
    assert "Content-Security-Policy" in html and "script-src 'sha256-" in html
    assert "<script>" not in md and "\\<script\\>document.title" in md and "\\<img src=x" in md


def test_figures_embedded(written: tuple[str, str, Path]) -> None:
    html, _, _ = written
    images = re.findall(r'<img src="data:image/png;base64,([^"]+)" alt="[^"]*" data-plot="(\w+)" data-has-data="(\w+)">', html)
    assert [(name, has) for _, name, has in images] == [("confidence", "true"), ("time", "true"), ("iterations", "true")]
    for data, _, _ in images:
        pixels = imread(io.BytesIO(base64.b64decode(data)), format="png")
        assert pixels.shape[0] > 100 and pixels.shape[1] > 100


def _report(items: list[BatchItem]) -> BatchReport:
    return BatchReport(name="edge", started_at=STARTED, finished_at=STARTED + dt.timedelta(minutes=30), items=items)


def test_empty_batch(tmp_path: Path) -> None:
    html_path, md_path = write_report(_report([]), tmp_path / "empty.html", SETTINGS)
    html, md = html_path.read_text(), md_path.read_text()
    assert "The batch has no questions." in md and "The batch has no questions." in html
    assert html.count('data-has-data="false"') == 3
    assert "| all modes | 0 | - | - | - | 0 | - | about 65% |" in md
    assert "| Jobs per hour | 0.0 |" in md and "| Prompt tokens | 0 |" in md
    assert "## Failures\n\nNone." in md


def test_all_failed_no_completed(tmp_path: Path) -> None:
    items = [BatchItem(line=n, key=str(n), question=f"made-up question {n}", mode="standard", status="failed", job_id=f"j{n}",
                       seconds=10.0 * n, error=f"boom {n}",
                       result=result(f"j{n}", "q", status="failed", confidence=0.0, iterations=0, prompt=10, completion=1, cost=0.5,
                                     termination="error"))
             for n in (1, 2)] + [BatchItem(line=3, status="invalid", error="not JSON")]
    html_path, md_path = write_report(_report(items), tmp_path / "failed.html", SETTINGS)
    html, md = html_path.read_text(), md_path.read_text()
    # no completed job: confidence and iterations plots say so; time per question still has the failed jobs
    assert re.findall(r'data-plot="(\w+)" data-has-data="(\w+)"', html) == [("confidence", "false"), ("time", "true"), ("iterations", "false")]
    failures = _md_section(md, "Failures")
    assert "| 1 | failed | made-up question 1 | boom 1 |" in failures and "| 3 | invalid |  | not JSON |" in failures
    assert "| Cost | $1.0000 |" in md and "| Jobs per hour | 4.0 |" in md and "| Prompt tokens | 20 |" in md


def test_zero_wall_time(tmp_path: Path) -> None:
    report = BatchReport(name="instant", started_at=STARTED, finished_at=STARTED, items=[])
    _, md_path = write_report(report, tmp_path / "r.html", SETTINGS)
    assert "| Jobs per hour | - |" in md_path.read_text()
