"""Corpus-side boundary models: parsed documents, chunks, periods and search hits."""
from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import BaseModel, Field, field_validator

Section = Literal["prepared_remarks", "qa"]
SourceType = Literal["transcript", "10k", "10k_table", "news"]
FilingKind = Literal["10k", "10q", "8k", "earnings"]  # documents.kind of a filing read page by page


class Company(BaseModel):
    ticker: str
    name: str
    aliases: list[str] = Field(default_factory=list)
    fiscal_year_end: str | None = None  # 'MM-DD'

    @field_validator("ticker")
    @classmethod
    def _upper(cls, v: str) -> str:
        return v.strip().upper()


class Period(BaseModel, frozen=True):
    """A fiscal period. quarter 0 means the whole fiscal year (10-K)."""

    fiscal_year: int
    fiscal_quarter: int = 0

    @property
    def key(self) -> str:
        return f"{self.fiscal_year}_q{self.fiscal_quarter}" if self.fiscal_quarter else f"FY{self.fiscal_year}"

    @property
    def label(self) -> str:
        return f"Q{self.fiscal_quarter} {self.fiscal_year}" if self.fiscal_quarter else f"FY{self.fiscal_year}"

    @classmethod
    def parse_key(cls, key: str) -> Period:
        if key.upper().startswith("FY"):
            return cls(fiscal_year=int(key[2:]))
        year, q = key.lower().split("_q")
        return cls(fiscal_year=int(year), fiscal_quarter=int(q))

    def __lt__(self, other: Period) -> bool:
        return (self.fiscal_year, self.fiscal_quarter) < (other.fiscal_year, other.fiscal_quarter)


class Turn(BaseModel):
    speaker: str
    section: Section
    text: str


class TranscriptDoc(BaseModel):
    ticker: str
    company_name: str | None = None
    fiscal_year: int
    fiscal_quarter: int = Field(ge=1, le=4)
    call_date: dt.date | None = None
    title: str | None = None
    turns: list[Turn] = Field(min_length=1)


class TenKSection(BaseModel):
    item: str  # '1', '1A', '7', '7A', '8', ...
    title: str = ""
    text: str


class TenKTable(BaseModel):
    item: str
    caption: str = ""
    rows: list[list[str]]
    markdown: str
    units: str = ""  # the units line printed above it ("(In millions, except per-share amounts)"), if any


class TenKDoc(BaseModel):
    ticker: str
    company_name: str | None = None
    fiscal_year: int
    period_end: dt.date | None = None
    sections: list[TenKSection] = Field(min_length=1)
    tables: list[TenKTable] = Field(default_factory=list)


class FilingPage(BaseModel):
    page: int = Field(ge=0)  # 0-based page of the PDF
    text: str


class FilingDoc(BaseModel):
    """A filing given as the text of its PDF pages (10-K, 10-Q, 8-K or earnings release)."""

    ticker: str
    company_name: str | None = None
    kind: FilingKind
    name: str  # the source's document name
    fiscal_year: int
    fiscal_quarter: int = Field(default=0, ge=0, le=4)  # 0 for annual documents and 8-Ks
    filed_on: dt.date | None = None  # 8-Ks: the date that tells a company's 8-Ks of one year apart
    pages: list[FilingPage] = Field(min_length=1)

    @property
    def title(self) -> str:
        return self.name


class SearchFilters(BaseModel):
    tickers: list[str] = Field(default_factory=list)
    periods: list[Period] = Field(default_factory=list)  # transcripts: fiscal quarters
    fiscal_years: list[int] = Field(default_factory=list)  # 10-K
    items: list[str] = Field(default_factory=list)  # 10-K items
    statements: list[str] = Field(default_factory=list)  # filings read page by page: primary statement pages only

    @property
    def is_filtered(self) -> bool:
        return bool(self.tickers or self.periods or self.fiscal_years or self.items or self.statements)


class SearchHit(BaseModel):
    source_type: SourceType
    chunk_id: int | str
    ticker: str | None = None
    fiscal_year: int | None = None
    fiscal_quarter: int | None = None
    item: str | None = None
    speaker: str | None = None
    section: str | None = None
    title: str | None = None
    url: str | None = None
    document_id: int | None = None  # with chunk_index: where the chunk sits in its document
    chunk_index: int | None = None
    page: int | None = None  # filings read page by page: the 0-based PDF page
    text: str
    score: float = 0.0
    semantic: float = 0.0
    keyword: float = 0.0

    @property
    def citation_key(self) -> str:
        return f"{self.source_type}:{self.chunk_id}"

    @property
    def period(self) -> str:
        if self.fiscal_year is None:
            return ""
        return Period(fiscal_year=self.fiscal_year, fiscal_quarter=self.fiscal_quarter or 0).label
