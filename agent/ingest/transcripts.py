"""Parse earnings-call transcripts: the JSON form of ../shared/data/transcripts and plain text with a metadata header."""
from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

from pydantic import ValidationError

from agent.ingest.failures import IngestError
from agent.models.corpus import TranscriptDoc, Turn

# {TICKER}_{YYYY}_q{N} (ours) or {TICKER}_q{N}_{YYYY} (upstream)
_NAME_PATTERNS = [
    re.compile(r"^(?P<t>[A-Za-z.]+)_(?P<y>\d{4})_q(?P<q>[1-4])$", re.I),
    re.compile(r"^(?P<t>[A-Za-z.]+)_q(?P<q>[1-4])_(?P<y>\d{4})$", re.I),
]
_SPEAKER_LINE = re.compile(r"^(?P<speaker>[^:\n]{2,120}):\s+(?P<text>\S.*)$")
_SECTION_LINE = re.compile(r"^==\s*(?P<name>.+?)\s*==\s*$")


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise IngestError(path, f"cannot read file ({exc.__class__.__name__}: {exc})") from exc
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise IngestError(path, "UTF-16 text: save the transcript as UTF-8")
    nul = data.find(b"\x00")
    if nul >= 0:
        raise IngestError(path, f"not a text file (a NUL byte at offset {nul})")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise IngestError(path, f"not UTF-8 text (byte 0x{data[exc.start]:02X} at offset {exc.start}, line {line}): "
                                "save the transcript as UTF-8") from None


def parse_transcript(path: Path, ticker: str | None = None) -> TranscriptDoc:
    raw = _read_text(path)
    if not raw.strip():
        raise IngestError(path, "file is empty")
    try:
        if raw.lstrip().startswith(("{", "[")):
            return _parse_json(path, raw, ticker)
        return _parse_text(path, raw, ticker)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise IngestError(path, f"invalid transcript: {'.'.join(map(str, first['loc']))}: {first['msg']}") from exc


def _period_from_name(path: Path) -> tuple[str, int, int]:
    for pattern in _NAME_PATTERNS:
        m = pattern.match(path.stem)
        if m:
            return m["t"].upper(), int(m["y"]), int(m["q"])
    raise IngestError(path, "cannot tell ticker and fiscal period: name the file {TICKER}_{YYYY}_q{N}.json")


def _parse_json(path: Path, raw: str, ticker: str | None) -> TranscriptDoc:
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise IngestError(path, f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from exc
    except RecursionError:  # the json module recurses per nesting level
        raise IngestError(path, "JSON nested too deeply to be a transcript") from None
    if not isinstance(data, dict) or not ({"prepared_remarks", "q_and_a"} & data.keys()):
        raise IngestError(path, "JSON is not a transcript: expected keys 'prepared_remarks' and 'q_and_a'")
    name_ticker, year, quarter = _period_from_name(path)
    turns = []
    for key, section in (("prepared_remarks", "prepared_remarks"), ("q_and_a", "qa")):
        listed = data.get(key) or []
        if not isinstance(listed, list):
            raise IngestError(path, f"'{key}' is a {type(listed).__name__}, not a list of turns")
        for i, turn in enumerate(listed):
            if not isinstance(turn, dict) or not isinstance(turn.get("speech"), str):
                raise IngestError(path, f"{key}[{i}] has no 'speech' text")
            turns.append(Turn(speaker=str(turn.get("speaker") or "Unknown"), section=section, text=turn["speech"]))
    if not turns:
        raise IngestError(path, "transcript has no turns")
    return TranscriptDoc(ticker=(ticker or name_ticker).upper(), fiscal_year=year, fiscal_quarter=quarter, turns=turns)


def _parse_text(path: Path, raw: str, ticker: str | None) -> TranscriptDoc:
    header_text, sep, body = raw.partition("\n---\n")
    if not sep:
        raise IngestError(path, "plain-text transcript needs a 'key: value' header ended by a line '---'")
    meta: dict[str, str] = {}
    for line in header_text.splitlines():
        if line.strip():
            key, colon, value = line.partition(":")
            if not colon:
                raise IngestError(path, f"bad header line {line!r}: expected 'key: value'")
            meta[key.strip().lower()] = value.strip()
    if "fiscal_year" not in meta or "fiscal_quarter" not in meta:
        try:
            name_ticker, year, quarter = _period_from_name(path)
        except IngestError:
            raise IngestError(path, "header needs fiscal_year and fiscal_quarter") from None
        meta.setdefault("ticker", name_ticker)
        meta.setdefault("fiscal_year", str(year))
        meta.setdefault("fiscal_quarter", str(quarter))
    if not (ticker or meta.get("ticker")):
        raise IngestError(path, "header needs a ticker")
    turns = _text_turns(body)
    if not turns:
        raise IngestError(path, "no 'Speaker: text' turns found after the header")
    call_date = None
    if meta.get("call_date"):
        try:
            call_date = dt.date.fromisoformat(meta["call_date"])
        except ValueError:
            raise IngestError(path, f"call_date {meta['call_date']!r} is not YYYY-MM-DD") from None
    return TranscriptDoc(
        ticker=(ticker or meta["ticker"]).upper(),
        company_name=meta.get("company"),
        fiscal_year=meta["fiscal_year"],
        fiscal_quarter=meta["fiscal_quarter"],
        call_date=call_date,
        title=meta.get("title"),
        turns=turns,
    )


def _text_turns(body: str) -> list[Turn]:
    section = "prepared_remarks"
    turns: list[Turn] = []
    for block in re.split(r"\n\s*\n", body):
        lines = block.strip().splitlines()
        if not lines:
            continue
        m = _SECTION_LINE.match(lines[0])
        if m:
            section = "qa" if re.search(r"question|q\s*&\s*a|q&a", m["name"], re.I) else "prepared_remarks"
            lines = lines[1:]
            if not lines:
                continue
        first = _SPEAKER_LINE.match(lines[0])
        text = "\n".join(lines[1:])
        if first:
            turns.append(Turn(speaker=first["speaker"].strip(), section=section, text=(first["text"] + "\n" + text).strip()))
        elif turns:  # a continuation paragraph of the previous speaker
            turns[-1].text += "\n\n" + "\n".join(lines)
    return turns
