"""Transcript parsing: the real JSON files, the upstream file names, plain text, and malformed inputs."""
from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import pytest

from agent.ingest.failures import IngestError
from agent.ingest.transcripts import parse_transcript

TEXT_SAMPLE = """\
ticker: snv
company: Synovus Financial Corp.
fiscal_year: 2021
fiscal_quarter: 3
call_date: 2021-10-20
title: Synovus Q3 2021 Earnings Call
---
== Prepared Remarks ==

Operator: Good morning and welcome to the call.

Kevin Blair: Thank you. Net interest margin expanded this quarter.
Loan growth was strong.

We also saw deposit growth.

== Questions and Answers ==

Brad Milsaps: Can you talk about the margin outlook?

Jamie Gregory: We expect the margin to stabilise.
"""


def _write(tmp_path: Path, name: str, content: str) -> Path:
    p = tmp_path / name
    p.write_text(content, encoding="utf-8")
    return p


# ---------------------------------------------------------------- real JSON


def test_real_json_file(shared_data):
    path = shared_data / "transcripts" / "SNV_2021_q3.json"
    raw = json.loads(path.read_text())
    doc = parse_transcript(path)
    assert (doc.ticker, doc.fiscal_year, doc.fiscal_quarter) == ("SNV", 2021, 3)
    prepared = [t for t in doc.turns if t.section == "prepared_remarks"]
    qa = [t for t in doc.turns if t.section == "qa"]
    assert len(prepared) == len(raw["prepared_remarks"]) > 0
    assert len(qa) == len(raw["q_and_a"]) > 0
    assert doc.turns[: len(prepared)] == prepared  # prepared remarks come first
    assert prepared[0].speaker == raw["prepared_remarks"][0]["speaker"]
    assert prepared[0].text == raw["prepared_remarks"][0]["speech"]
    assert qa[-1].text == raw["q_and_a"][-1]["speech"]


def test_every_real_file_parses_with_period_from_its_name(shared_data):
    files = sorted((shared_data / "transcripts").glob("*.json"))
    assert len(files) == 68
    for path in files:
        ticker, year, q = path.stem.split("_")
        doc = parse_transcript(path)
        assert (doc.ticker, doc.fiscal_year, doc.fiscal_quarter) == (ticker, int(year), int(q[1:])), path
        assert {t.section for t in doc.turns} == {"prepared_remarks", "qa"}, path


def test_upstream_file_name_form(shared_data, tmp_path):
    # upstream names the files {TICKER}_q{N}_{YYYY}
    path = tmp_path / "AFL_q4_2020.txt"
    shutil.copy(shared_data / "transcripts" / "AFL_2019_q4.json", path)
    doc = parse_transcript(path)
    assert (doc.ticker, doc.fiscal_year, doc.fiscal_quarter) == ("AFL", 2020, 4)
    assert {t.section for t in doc.turns} == {"prepared_remarks", "qa"}


def test_small_json_with_one_section_only(tmp_path):
    path = _write(tmp_path, "bkU_2021_Q2.json", json.dumps({"q_and_a": [{"speaker": "A", "speech": "Hi."}]}))
    doc = parse_transcript(path)
    assert (doc.ticker, doc.fiscal_year, doc.fiscal_quarter) == ("BKU", 2021, 2)
    assert [(t.speaker, t.section, t.text) for t in doc.turns] == [("A", "qa", "Hi.")]


def test_json_turn_without_speaker_is_unknown(tmp_path):
    path = _write(tmp_path, "X_2021_q1.json", json.dumps({"prepared_remarks": [{"speech": "Hello."}]}))
    assert parse_transcript(path).turns[0].speaker == "Unknown"


# ---------------------------------------------------------------- plain text


def test_plain_text_format(tmp_path):
    doc = parse_transcript(_write(tmp_path, "whatever.txt", TEXT_SAMPLE))
    assert doc.ticker == "SNV"
    assert doc.company_name == "Synovus Financial Corp."
    assert (doc.fiscal_year, doc.fiscal_quarter) == (2021, 3)
    assert doc.call_date == dt.date(2021, 10, 20)
    assert doc.title == "Synovus Q3 2021 Earnings Call"
    assert [(t.speaker, t.section) for t in doc.turns] == [
        ("Operator", "prepared_remarks"),
        ("Kevin Blair", "prepared_remarks"),
        ("Brad Milsaps", "qa"),
        ("Jamie Gregory", "qa"),
    ]
    kevin = doc.turns[1].text
    # a multi-line turn and its continuation paragraph stay with the speaker
    assert "Net interest margin expanded this quarter." in kevin
    assert "Loan growth was strong." in kevin
    assert "We also saw deposit growth." in kevin
    assert doc.turns[3].text == "We expect the margin to stabilise."


def test_plain_text_period_from_file_name_when_header_lacks_it(tmp_path):
    content = "company: Aflac\n---\nOperator: Welcome.\n"
    doc = parse_transcript(_write(tmp_path, "AFL_2021_q2.txt", content))
    assert (doc.ticker, doc.fiscal_year, doc.fiscal_quarter) == ("AFL", 2021, 2)
    assert doc.company_name == "Aflac"
    assert doc.call_date is None


def test_explicit_ticker_overrides_the_header(tmp_path):
    doc = parse_transcript(_write(tmp_path, "t.txt", TEXT_SAMPLE), ticker="cfr")
    assert doc.ticker == "CFR"


# ---------------------------------------------------------------- malformed inputs


def _error(path: Path) -> IngestError:
    with pytest.raises(IngestError) as info:
        parse_transcript(path)
    err = info.value
    assert str(path) in str(err), "the message must name the file"
    assert err.path == str(path)
    return err


def test_empty_file(tmp_path):
    err = _error(_write(tmp_path, "SNV_2021_q1.json", "  \n\n"))
    assert "empty" in err.reason


def test_invalid_json(tmp_path):
    err = _error(_write(tmp_path, "SNV_2021_q1.json", '{"prepared_remarks": [ {"speaker": "A",\n'))
    assert "malformed JSON" in err.reason and "line" in err.reason


def test_json_without_transcript_keys(tmp_path):
    err = _error(_write(tmp_path, "SNV_2021_q1.json", json.dumps({"title": "x", "body": []})))
    assert "prepared_remarks" in err.reason and "q_and_a" in err.reason


def test_json_with_empty_sections_has_no_turns(tmp_path):
    err = _error(_write(tmp_path, "SNV_2021_q1.json", json.dumps({"prepared_remarks": [], "q_and_a": []})))
    assert "no turns" in err.reason


def test_json_turn_without_speech(tmp_path):
    err = _error(_write(tmp_path, "SNV_2021_q1.json", json.dumps({"prepared_remarks": [{"speaker": "A", "text": "x"}]})))
    assert "prepared_remarks[0]" in err.reason and "speech" in err.reason


def test_text_without_header(tmp_path):
    err = _error(_write(tmp_path, "SNV_2021_q1.txt", "Operator: Welcome.\n\nCEO: Thanks.\n"))
    assert "header" in err.reason and "---" in err.reason


def test_text_with_bad_header_line(tmp_path):
    err = _error(_write(tmp_path, "SNV_2021_q1.txt", "ticker: SNV\nthis line has no colon\n---\nOperator: Hi.\n"))
    assert "this line has no colon" in err.reason


def test_bad_call_date(tmp_path):
    content = TEXT_SAMPLE.replace("call_date: 2021-10-20", "call_date: 20/10/2021")
    err = _error(_write(tmp_path, "t.txt", content))
    assert "call_date" in err.reason and "20/10/2021" in err.reason and "YYYY-MM-DD" in err.reason


def test_bad_fiscal_quarter_in_header(tmp_path):
    content = TEXT_SAMPLE.replace("fiscal_quarter: 3", "fiscal_quarter: 7")
    err = _error(_write(tmp_path, "t.txt", content))
    assert "fiscal_quarter" in err.reason


def test_text_without_turns(tmp_path):
    content = "ticker: SNV\nfiscal_year: 2021\nfiscal_quarter: 1\n---\njust some prose without any speaker\n"
    err = _error(_write(tmp_path, "t.txt", content))
    assert "Speaker: text" in err.reason


def test_text_without_period_and_unknown_name(tmp_path):
    err = _error(_write(tmp_path, "notes.txt", "ticker: SNV\n---\nOperator: Hi.\n"))
    assert "fiscal_year" in err.reason and "fiscal_quarter" in err.reason


@pytest.mark.parametrize("name", ["snv-2021-q3.json", "SNV_2021_q5.json", "SNV_21_q3.json", "transcript.json"])
def test_json_with_unknown_file_name_pattern(tmp_path, name):
    err = _error(_write(tmp_path, name, json.dumps({"prepared_remarks": [{"speaker": "A", "speech": "Hi."}]})))
    assert "{TICKER}_{YYYY}_q{N}" in err.reason


def test_undecodable_file(tmp_path):
    path = tmp_path / "SNV_2021_q1.json"
    path.write_bytes(b"\xff\xfe\x00garbage\x80")
    err = _error(path)
    assert "UTF-16" in err.reason  # the byte-order mark says what the file is


def test_explicit_ticker_is_upper_cased_for_json_too(tmp_path):
    # search filters upper-case tickers, so a lower-case one stored from a JSON file would never be found
    path = _write(tmp_path, "X_2021_q1.json", json.dumps({"prepared_remarks": [{"speaker": "A", "speech": "Hi."}]}))
    assert parse_transcript(path, ticker="snv").ticker == "SNV"
