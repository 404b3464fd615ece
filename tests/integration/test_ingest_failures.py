"""Ingestion failures are per file: when the embedding provider fails on the workers, and when a file is malformed or
hostile (truncated, empty, enormous, wrongly encoded, an HTML bomb, a PDF of empty pages), each affected file is reported
with its reason, nothing partial is written, and the other files of the run still go in."""
from __future__ import annotations

import json
import resource
import shutil
from pathlib import Path

import pytest

from agent.ingest.runner import ingest
from tasks.ingest import EmbedFanOut

pytestmark = pytest.mark.integration


def test_embedding_failure_on_workers_fails_files_cleanly(ctx, workers_with, shared_data, tmp_path):
    src = sorted((shared_data / "transcripts").glob("SNV_*.json"))[:2]
    for f in src:  # private copies under new tickers, so no other test has them
        shutil.copy(f, tmp_path / f.name.replace("SNV_", "ZZF_"))
    workers_with(FINAGENT_EMBEDDING_PROVIDER="openai", FINAGENT_LLM_BASE_URL="http://127.0.0.1:9/v1",
                   FINAGENT_OPENAI_API_KEY="sk-test", FINAGENT_LLM_TIMEOUT_S="2")
    report = ingest(ctx, "transcript", [tmp_path], fanout=EmbedFanOut, quiet=True)
    assert len(report.errors) == 2 and all("embedding failed" in f.reason for f in report.errors)
    with ctx.pool.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM transcript_chunks WHERE ticker='ZZF'").fetchone()["n"] == 0
        assert conn.execute("SELECT count(*) AS n FROM documents WHERE ticker='ZZF'").fetchone()["n"] == 0

    workers_with()  # the provider is back
    report = ingest(ctx, "transcript", [tmp_path], fanout=EmbedFanOut, quiet=True)
    assert not report.errors and {f.status for f in report.files} == {"added"}
    with ctx.pool.connection() as conn:
        n = conn.execute("SELECT count(*) AS n FROM transcript_chunks WHERE ticker='ZZF'").fetchone()["n"]
    assert n == sum(f.chunks for f in report.files) > 64  # more than one embedding batch


# ---------- malformed and hostile files: each fails alone, with its reason, and leaves nothing behind ----------

MB = 1024 * 1024
SPEECH = "Revenue grew eight percent on higher service volumes. Margins held steady as input costs eased."


def _transcript(speech: str = SPEECH) -> str:
    return json.dumps({"prepared_remarks": [{"speaker": "Chief Executive Officer", "speech": speech}], "q_and_a": []}, ensure_ascii=False)


def _tenk(ticker: str, body: str = "") -> str:
    return (f'<html><head><meta name="ticker" content="{ticker}"><meta name="fiscal_year" content="2024"></head><body>'
            "<p>Item 1. Business</p><p>We make industrial pumps for utilities and renew service contracts yearly.</p>"
            "<p>Item 7. Management's Discussion and Analysis</p><p>Net sales rose 8% on higher service volumes.</p>"
            f"{body}</body></html>")


def _blank_pdf(path: Path, pages: int) -> None:
    from pypdf import PdfWriter

    writer = PdfWriter()
    for _ in range(pages):
        writer.add_blank_page(612, 792)
    with path.open("wb") as fh:
        writer.write(fh)


def hostile_transcripts(root: Path) -> dict[str, str]:
    """File name -> what its failure reason must say. Each file's name gives it a ticker of its own."""
    (root / "ZTGOOD_2024_q1.json").write_text(_transcript())
    (root / "ZTGOOD_2024_q2.txt").write_text(f"ticker: ZTGOOD\nfiscal_year: 2024\nfiscal_quarter: 2\n---\nChief Executive Officer: {SPEECH}\n")
    files = {
        "ZTEMPTY_2024_q1.json": (b"", "file is empty"),
        "ZTTRUNC_2024_q1.json": (_transcript().encode()[:60], "malformed JSON"),
        "ZTLINE_2024_q1.txt": (b"ticker: ZTLINE\nfiscal_year: 2024\nfiscal_quarter: 1\n---\nCEO: " + b"revenue " * (50 * MB // 8),
                               "over the ingest limit"),
        "ZTBIGSTR_2024_q1.json": (_transcript("x" * 50 * MB).encode(), "over the ingest limit"),
        "ZTUTF16_2024_q1.json": (_transcript().encode("utf-16"), "UTF-16"),
        "ZTLATIN_2024_q1.json": (_transcript("Caf\u00e9 sales rose.").encode("latin-1"), "not UTF-8 text (byte 0xE9"),
        "ZTBINARY_2024_q1.json": (b"{" + bytes(range(256)) * 40, "not a text file"),
        "ZTNUL_2024_q1.json": (_transcript("Revenue \u0000 grew.").encode(), "NUL characters"),
        "ZTSURR_2024_q1.json": (_transcript("Revenue grew.").replace("grew", "\\ud800grew").encode(), "not valid Unicode"),
        "ZTDEEP_2024_q1.json": (b'{"prepared_remarks": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply"),
        "ZTLIST_2024_q1.json": (b'["not", "a", "transcript"]', "JSON is not a transcript"),
        "ZTHEADER_2024_q1.txt": (b"no header at all, just prose", "needs a 'key: value' header"),
    }
    for name, (data, _) in files.items():
        (root / name).write_bytes(data)
    return {name: says for name, (_, says) in files.items()}


def hostile_tenks(root: Path) -> dict[str, str]:
    (root / "ZKGOODK.htm").write_text(_tenk("ZKGOODK", '<table><tr><td colspan="2147483647">Net sales</td></tr>'
                                                       "<tr><td>Pumps</td><td>300.1</td><td>280.0</td></tr>"
                                                       "<tr><td>Service</td><td>112.4</td><td>101.9</td></tr></table>"))
    files = {
        "ZKNEST.htm": (_tenk("ZKNEST", "<div>" * 100_000 + "deep" + "</div>" * 100_000).encode(), "nested more than"),
        "ZKNEST220.htm": (_tenk("ZKNESTB", "<div>" * 220 + "deep" + "</div>" * 220).encode(), "nested more than 200 elements"),
        "ZKATTR.htm": (_tenk("ZKATTR", '<div title="' + "A" * 20 * MB + '">x</div>').encode(), "attribute value over 10 MB"),
        "ZKBINARY.htm": (bytes(range(256)) * 64, "binary data"),
        "ZKUTF16.htm": (_tenk("ZKUTF").encode("utf-16"), "binary data"),
        "ZKEMPTY.htm": (b"", "file is empty"),
        "ZKTRUNC.htm": (_tenk("ZKTRUNC").encode()[:90], "no 10-K Items found"),
        "ZKHEADS.htm": (_tenk("ZKHEADS", "".join(f"<p>Item {i % 15 + 1}. Title</p>" for i in range(5000))).encode(), "look like item headings"),
        "ZKBROKEN_2024_10K.pdf": (b"%PDF-1.7\n" + bytes(range(256)) * 100, "cannot read PDF"),
    }
    for name, (data, _) in files.items():
        (root / name).write_bytes(data)
    _blank_pdf(root / "ZKPAGES_2024_10K.pdf", 3000)
    _blank_pdf(root / "ZKBLANK_2024_10K.pdf", 200)
    return {name: says for name, (_, says) in files.items()} | {
        "ZKPAGES_2024_10K.pdf": "3000 pages, over the limit of 2000", "ZKBLANK_2024_10K.pdf": "no extractable text in the first 30 of 200 pages"}


def _rows(ctx, prefix: str) -> dict[str, int]:
    with ctx.pool.connection() as conn:
        return {table: conn.execute(f"SELECT count(*) AS n FROM {table} WHERE ticker LIKE %s", (prefix + "%",)).fetchone()["n"]
                for table in ("documents", "transcript_chunks", "tenk_chunks", "tenk_tables")}


@pytest.mark.parametrize("kind,make,prefix,good", [
    ("transcript", hostile_transcripts, "ZT", {"ZTGOOD_2024_q1.json", "ZTGOOD_2024_q2.txt"}),
    ("10k", hostile_tenks, "ZK", {"ZKGOODK.htm"}),
])
def test_hostile_files_fail_alone_with_their_reason_and_write_nothing(ctx, tmp_path, kind, make, prefix, good):
    expected = make(tmp_path)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    report = ingest(ctx, kind, [tmp_path], fanout=None, quiet=True)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    outcomes = {Path(f.path).name: f for f in report.files}
    assert {n for n, f in outcomes.items() if f.status == "added"} == good  # the good files of the same run went in
    for name, says in expected.items():
        assert outcomes[name].status == "error", (name, outcomes[name])
        reason = outcomes[name].reason or ""
        assert says in reason and "\n" not in reason and len(reason) <= 300, (name, reason)
    rows = _rows(ctx, prefix)
    assert rows["documents"] == len(good)  # nothing of any failed file
    chunks = rows["transcript_chunks"] + rows["tenk_chunks"]
    assert chunks == sum(outcomes[n].chunks for n in good) > 0
    assert grown_mb < 1024, f"ingesting the hostile files grew the process by {grown_mb:.0f} MB"
    for f in tmp_path.iterdir():  # the 50 MB files are not kept in the pytest temp dir
        f.unlink()


def test_the_cli_reports_each_failed_file_and_exits_2(ctx, tmp_path):
    from tests.integration.test_bad_input import _finagent

    (tmp_path / "ZJOK_2024_q3.json").write_text(_transcript())
    (tmp_path / "ZJBAD_2024_q3.json").write_bytes(_transcript().encode("utf-16"))
    r = _finagent(ctx, tmp_path, "ingest", "transcripts", str(tmp_path), "--inline", "--json")
    assert r.returncode == 2, r.stderr
    out = json.loads(r.stdout)
    by_name = {Path(f["path"]).name: f for f in out["files"]}
    assert by_name["ZJOK_2024_q3.json"]["status"] == "added" and out["errors"] == 1
    bad = by_name["ZJBAD_2024_q3.json"]
    assert (bad["status"], bad["reason"]) == ("error", "UTF-16 text: save the transcript as UTF-8")
    assert _rows(ctx, "ZJBAD")["documents"] == 0
