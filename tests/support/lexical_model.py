"""A deterministic stand-in for a chat model, for the fault-injecting server: request JSON in, reply text out.

It reads only the request: the role comes from the JSON schema the request carries (response_format, Ollama's
`format`, or the schema written at the end of the system prompt), the content from the prompt's own text (the
question, the company list, the fenced passages, the findings). Nothing here knows any company, figure or
sentence: every ticker it plans and every sentence it quotes is copied from the prompt it was given.
"""
from __future__ import annotations

import json
import re
from typing import Any

ROLE_BY_SCHEMA = {"PlanOutput": "plan", "ExtractOutput": "extract", "EvaluationScores": "evaluate",
                  "TenKPlanOutput": "plan_10k", "SelectTablesOutput": "select_tables", "TenKEvaluation": "evaluate_10k"}

_PASSAGE = re.compile(r"<<<(EVIDENCE|UNTRUSTED_NEWS)(?:[ \t]+([^\n]*?))?>>>\n(.*?)\n<<<END_\1>>>", re.S)
_ATTR = re.compile(r'(\w+)="([^"]*)"')
_MARKER_END = re.compile(r"\s(\[[A-Za-z0-9]+\])\s*$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[$])")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9&'\-]*")
_TIME = re.compile(
    r"\b(?:Q[1-4]\s*(?:FY)?\s*'?\d{2,4}|FY\s*'?\d{2,4}|H[12]\s*\d{4}"
    r"|(?:last|past|previous|trailing|prior)\s+(?:\d+|two|three|four|five|six|eight|twelve)\s+(?:quarters|years|months)"
    r"|(?:last|latest|most recent|previous|prior|this|next)\s+(?:quarter|year|fiscal year)|latest|(?:19|20)\d{2})\b", re.I)
_STOP = frozenset("""a an and are as at be by can could did do does for from has have how in is it its of on or over
the their them they this to was were what when where which who why will with would about between during than that these
those into after before since vs versus compare compared last latest quarter quarters year years q1 q2 q3 q4 fy
much many please tell me give show explain""".split())
_CORPORATE_SUFFIX = re.compile(r"[,.]?\s+(?:inc|incorporated|corp|corporation|co|company|ltd|limited|plc|holdings|group|sa|ag|nv)\.?$",
                               re.I)


# ---------- reading the request ----------
def request_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON schema the request asks for, in whichever form it came (None for a free-text request)."""
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema" and isinstance(fmt.get("json_schema"), dict):
        return fmt["json_schema"].get("schema")
    if isinstance(fmt.get("schema"), dict):
        return fmt["schema"]
    if isinstance(body.get("format"), dict):
        return body["format"]
    system = _system(body)
    at = system.rfind("JSON schema:")
    if at < 0:
        return None
    try:
        schema, _ = json.JSONDecoder().raw_decode(system[at + len("JSON schema:"):].lstrip())
    except ValueError:
        return None
    return schema if isinstance(schema, dict) else None


def guess_role(body: dict[str, Any]) -> str:
    schema = request_schema(body)
    if schema is not None:
        return ROLE_BY_SCHEMA.get(str(schema.get("title", "")), "unknown")
    return "answer_10k" if "10-K agent" in _system(body) else "compose"


def is_repair(body: dict[str, Any]) -> bool:
    msgs = body.get("messages") or []
    return len(msgs) > 2 and msgs[-2].get("role") == "assistant"


def _system(body: dict[str, Any]) -> str:
    return "\n".join(_text(m) for m in body.get("messages") or [] if m.get("role") == "system")


def _user(body: dict[str, Any]) -> str:
    """The first user message: the task itself (a repair request's last message only asks to fix the reply)."""
    return next((_text(m) for m in body.get("messages") or [] if m.get("role") == "user"), "")


def _text(message: dict[str, Any]) -> str:
    content = message.get("content") or ""
    if isinstance(content, list):  # content parts
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content)


def _field(user: str, label: str) -> str:
    """The value after `label:` up to the next blank line; a JSON string literal is decoded."""
    m = re.search(rf"^{re.escape(label)}:[ \t]*(.*?)(?:\n\n|\Z)", user, re.S | re.M)
    value = m.group(1).strip() if m else ""
    if value.startswith('"'):
        try:
            decoded, _ = json.JSONDecoder().raw_decode(value)
            return str(decoded)
        except ValueError:
            pass
    return value


def passages(user: str) -> list[tuple[dict[str, str], str]]:
    return [(dict(_ATTR.findall(head)), text.strip()) for _, head, text in _PASSAGE.findall(user)]


def keywords(text: str) -> list[str]:
    seen: dict[str, None] = {}
    for w in _WORD.findall(text):
        if w.lower() not in _STOP and len(w) > 1:
            seen.setdefault(w.lower(), None)
    return list(seen)


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(" ".join(text.split())) if len(s.strip()) > 3]


def best_sentence(text: str, words: list[str]) -> str:
    """The passage's sentence sharing the most words with the question (the first one on a tie)."""
    wanted = set(words)
    candidates = sentences(text) or [" ".join(text.split())]
    return max(candidates, key=lambda s: len(wanted & {w.lower() for w in _WORD.findall(s)}))


# ---------- the roles ----------
def plan(body: dict[str, Any]) -> dict[str, Any]:
    user = _user(body)
    question = _field(user, "Question")
    hint = re.search(r"use exactly them:\s*(.+)$", user, re.M)
    tickers = [t.strip() for t in hint.group(1).split(",") if t.strip()] if hint else _mentioned_tickers(user, question)
    topic_words = [w for w in keywords(question) if w.upper() not in tickers][:6]
    topic = " ".join(topic_words) or "results"
    multiple = len(tickers) > 1
    comparison = multiple and re.search(r"\b(compare|compared|versus|vs\.?|relative to)\b", question, re.I) is not None
    return {
        "reasoning": f"Find what the sources say about {topic} for {', '.join(tickers) or 'the companies asked about'}, "
                     "with the figures, periods and the drivers management names.",
        "tickers": tickers,
        "time_refs": list(dict.fromkeys(m.group(0) for m in _TIME.finditer(question))),
        "intent": "understand a result",
        "topic": topic,
        "question_type": "comparison" if comparison else "multiple_companies" if multiple else "single_company",
        "answer_mode": "standard",
        "data_sources": ["earnings_transcripts"],
        "needs_latest_news": False,
        "needs_10k": False,
        "search_queries": [q for q in dict.fromkeys([topic, " ".join(topic_words[:3])]) if q][:4],
        "is_valid": True,
        "invalid_reason": None,
        "confidence": 0.9,
    }


def _mentioned_tickers(user: str, question: str) -> list[str]:
    block = user.split("Known companies:", 1)[-1]
    found: list[str] = []
    for m in re.finditer(r"^- ([A-Za-z0-9.\-]+): (.+?)(?: \(also: (.+)\))?$", block, re.M):
        ticker, name, aliases = m.group(1), m.group(2).strip(), m.group(3) or ""
        names = [name, _short_name(name), *(a.strip() for a in aliases.split(",") if a.strip())]
        by_name = any(re.search(rf"(?<![A-Za-z]){re.escape(n)}(?![A-Za-z])", question, re.I) for n in names if len(n) > 2)
        if by_name or re.search(rf"(?<![A-Za-z$]){re.escape(ticker)}(?![A-Za-z])", question.replace("$", "")):
            found.append(ticker.upper())
    return found


def _short_name(name: str) -> str:
    """The name without its corporate suffixes ("Holdings Inc." and the like)."""
    while (shorter := _CORPORATE_SUFFIX.sub("", name)) != name:
        name = shorter
    return name


def extract(body: dict[str, Any]) -> dict[str, Any]:
    user = _user(body)
    words = keywords(_field(user, "Question"))
    limit = re.search(r"Pick at most (\d+) findings", user)
    findings: list[dict[str, str]] = []
    seen: set[str] = set()
    for attrs, text in passages(user):
        key = attrs.get("citation_key", "")
        sentence = best_sentence(text, words) if text else ""
        if key and sentence and sentence.lower() not in seen:
            seen.add(sentence.lower())
            findings.append({"citation_key": key, "text": sentence})
    return {"findings": findings[: int(limit.group(1)) if limit else 5]}


def compose(body: dict[str, Any]) -> str:
    user = _user(body)
    block = user.split("Findings (marker after each):", 1)[-1].split("\n\n", 1)[0] if "Findings (marker after each):" in user else ""
    rows = [line[2:].strip() for line in block.splitlines() if line.startswith("- ") and _MARKER_END.search(line)]
    if not rows:  # no findings: quote the cited passages themselves
        words = keywords(_field(user, "Question"))
        rows = [f"{best_sentence(text, words)} {attrs['marker']}" for attrs, text in passages(user) if attrs.get("marker") and text]
    if not rows:
        return "The sources given do not answer this question."
    return "From the sources:\n" + "\n".join(f"- {row}" for row in rows)


def evaluate(body: dict[str, Any]) -> dict[str, Any]:
    user = _user(body)
    answer = user.split("<<<ANSWER>>>", 1)[-1].split("<<<END_ANSWER>>>", 1)[0]
    cited = re.search(r"\[[A-Za-z0-9]+\]", answer) is not None
    score = 90 if cited else 40
    previous = {k.lower() for k in json.loads(_field(user, "Previous keywords (do not repeat)") or "[]")}
    followup = [] if cited else [k for k in [" ".join(keywords(_field(user, "Question"))[:5])] if k and k.lower() not in previous]
    return {"completeness_score": score, "specificity_score": score, "accuracy_score": score, "clarity_score": score,
            "issues": [] if cited else ["The answer cites no source."], "missing_info": [], "suggestions": [],
            "is_sufficient": cited, "followup_keywords": followup, "needs_transcript_search": not cited,
            "needs_news_search": False, "news_query": None}


def plan_10k(body: dict[str, Any]) -> dict[str, Any]:
    question = _field(_user(body), "Question")
    phrase = " ".join(keywords(question)[:6]) or "results of operations"
    return {"sub_questions": [{"id": 1, "text": question, "kind": "TABLE", "items": ["8"], "keywords": phrase},
                              {"id": 2, "text": question, "kind": "TEXT", "items": ["7"], "keywords": phrase}],
            "search_plan": "Figures from the financial statements in Item 8, explanations from MD&A in Item 7.",
            "calculation": None}


def select_tables(body: dict[str, Any]) -> dict[str, Any]:
    user = _user(body)
    cap = re.search(r"Choose at most (\d+) tables", _system(body))
    ids = [int(i) for i in re.findall(r'<<<TABLE id="(\d+)"', user)]
    return {"table_ids": ids[: int(cap.group(1)) if cap else 3], "reasoning": "The first candidates hold the rows asked for."}


def answer_10k(body: dict[str, Any]) -> str:
    user = _user(body)
    words = keywords(_field(user, "Question"))
    rows = [f"- {best_sentence(text, words)} {attrs['marker']}" for attrs, text in passages(user) if attrs.get("marker") and text]
    return "\n".join(rows) or "- Not found in the retrieved 10-K: the sources given hold nothing on this question."


def evaluate_10k(body: dict[str, Any]) -> dict[str, Any]:
    ids = [int(i) for i in re.findall(r"^(\d+)\. \[", _user(body), re.M)]
    return {"quality": 1.0 if ids else 0.0, "missing_info": [], "answered": ids}


def minimal_instance(schema: dict[str, Any], root: dict[str, Any] | None = None) -> Any:
    """The smallest value that validates against a JSON schema (for a role this model does not know)."""
    root = root or schema
    if "$ref" in schema:
        return minimal_instance(root.get("$defs", {}).get(schema["$ref"].rsplit("/", 1)[-1], {}), root)
    if "default" in schema:
        return schema["default"]
    if "enum" in schema:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return minimal_instance(schema[key][0], root)
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        return {name: minimal_instance(props.get(name, {}), root) for name in schema.get("required", [])}
    if kind == "array":
        return [minimal_instance(schema.get("items", {}), root) for _ in range(schema.get("minItems", 0))]
    return {"string": "", "integer": schema.get("minimum", 0), "number": schema.get("minimum", 0), "boolean": False}.get(str(kind))


_JSON_ROLES = {"plan": plan, "extract": extract, "evaluate": evaluate, "plan_10k": plan_10k, "select_tables": select_tables,
               "evaluate_10k": evaluate_10k}
_TEXT_ROLES = {"compose": compose, "answer_10k": answer_10k}


def respond(body: dict[str, Any]) -> str:
    """The assistant message content for a successful call."""
    role = guess_role(body)
    if role in _TEXT_ROLES:
        return _TEXT_ROLES[role](body)
    if role in _JSON_ROLES:
        return json.dumps(_JSON_ROLES[role](body))
    return json.dumps(minimal_instance(request_schema(body) or {"type": "object"}))
