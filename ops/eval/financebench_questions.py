"""FinanceBench questions: one JSON object per line, in the format of the open-source release
(financebench_id, company, doc_name, question, answer, evidence [{doc_name, evidence_page_num, ...}], ...).

Only `financebench_id` and `question` are required, so a blind copy with the gold fields removed still loads;
an eval that needs evidence says so per question. Unknown fields are kept, not refused."""
from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class QuestionsFileError(ValueError):
    """A questions file that cannot be read; str() is one readable line naming the file (and line)."""


class EvidenceItem(BaseModel):
    model_config = ConfigDict(extra="allow")

    doc_name: str
    evidence_page_num: int = Field(ge=0)  # 0-based, like the pages files
    evidence_text: str = ""
    evidence_text_full_page: str = ""


class FinanceBenchQuestion(BaseModel):
    model_config = ConfigDict(extra="allow")

    financebench_id: str = Field(min_length=1)
    question: str = Field(min_length=1)
    company: str | None = None
    doc_name: str | None = None
    question_type: str | None = None
    question_reasoning: str | None = None
    domain_question_num: str | None = None
    answer: str | None = None
    justification: str | None = None
    dataset_subset_label: str | None = None
    evidence: list[EvidenceItem] = Field(default_factory=list)

    @property
    def evidence_pages(self) -> set[tuple[str, int]]:
        return {(e.doc_name, e.evidence_page_num) for e in self.evidence}

    @property
    def evidence_docs(self) -> set[str]:
        return {e.doc_name for e in self.evidence}


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "line"
    return f"{where}: {err['msg']}"


def load_questions(path: Path) -> list[FinanceBenchQuestion]:
    """Every question of a JSONL file, or QuestionsFileError on the first bad line (blank lines are skipped)."""
    path = Path(path)
    if not path.is_file():
        raise QuestionsFileError(f"{path}: no such questions file")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise QuestionsFileError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    out: list[FinanceBenchQuestion] = []
    seen: set[str] = set()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise QuestionsFileError(f"{path} line {n}: not JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise QuestionsFileError(f"{path} line {n}: expected a JSON object, got {type(row).__name__}")
        try:
            q = FinanceBenchQuestion.model_validate(row)
        except ValidationError as exc:
            raise QuestionsFileError(f"{path} line {n}: {_first_error(exc)}") from None
        if q.financebench_id in seen:
            raise QuestionsFileError(f"{path} line {n}: duplicate financebench_id {q.financebench_id!r}")
        seen.add(q.financebench_id)
        out.append(q)
    if not out:
        raise QuestionsFileError(f"{path}: no questions (expected one JSON object per line)")
    return out
