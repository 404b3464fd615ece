"""Small text utilities shared by the extractive provider and the evaluator."""
from __future__ import annotations

import re

_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z$\"(])")
_NUMBER = re.compile(r"\$?\d[\d,]*(?:\.\d+)?\s?(?:%|percent|billion|million|thousand|bn|bps|basis points)?", re.I)
_WORD = re.compile(r"[a-z][a-z0-9&\-]+")

STOPWORDS = frozenset(
    """a an the and or but of for to in on at by with from as is are was were be been being it its it's this that these those
    what which who whom whose how why when where did do does done has have had will would shall should can could may might
    me my we our you your they their them he she his her i about over under into than then there here also any all each
    some such very more most much many last latest recent quarter quarters year years fiscal q1 q2 q3 q4 fy compare
    compared versus vs between tell show give explain describe please across during per s""".split()
)


def sentences(text: str) -> list[str]:
    text = re.sub(r"^[^:\n]{2,80}:\s", "", text.strip())  # drop a leading "Speaker: "
    out = []
    for part in text.split("\n"):
        part = re.sub(r"^[^:\n]{2,80}:\s", "", part.strip())
        out += [s.strip() for s in _SENT.split(part) if len(s.strip()) > 20]
    return out


def numbers(text: str) -> list[str]:
    """Figures as written ('$35.1 billion', '94%', '2,000'); bare years and small ordinals are left out."""
    found = []
    for m in _NUMBER.finditer(text):
        token = m.group(0).strip()
        digits = re.sub(r"[^\d.]", "", token)
        if not digits or digits == ".":
            continue
        is_year = re.fullmatch(r"(19|20)\d{2}", digits) and not re.search(r"[$%]|illion", token)
        if is_year or (len(digits) == 1 and not re.search(r"[$%]|illion", token)):
            continue
        found.append(token)
    return found


def normalise_number(token: str) -> str:
    return re.sub(r"[^\d.]", "", token).rstrip(".").lstrip("0") or "0"


def content_words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in STOPWORDS and len(w) > 2]


def stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word
