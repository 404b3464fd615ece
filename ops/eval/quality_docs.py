"""docs/quality.md: one section per eval command, each replaced in place when its command runs with --write-docs."""
from __future__ import annotations

import re
from pathlib import Path

QUALITY_DOC = Path(__file__).resolve().parents[2] / "docs" / "quality.md"
QUALITY_INTRO = "# Research quality\n\nMeasured on public data nobody here wrote; each section is written by its eval command.\n"


def write_section(path: Path, heading: str, body: str) -> None:
    """Replace this section (from its heading to the next '## ' heading) or append it; the rest stays as it is."""
    text = path.read_text() if path.exists() else QUALITY_INTRO
    pattern = re.compile(rf"^{re.escape(heading)}\n.*?(?=^## |\Z)", re.MULTILINE | re.DOTALL)
    block = body.strip() + "\n\n"
    text = pattern.sub(lambda _: block, text, count=1) if pattern.search(text) else text.rstrip() + "\n\n" + block
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.rstrip() + "\n")
