"""The README is the operators' reference: it must name every metric the code defines."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_lists_every_metric():
    defined = set(re.findall(r'"(finagent_[a-z_]+)"', (ROOT / "agent/infra/metrics.py").read_text()))
    assert len(defined) >= 15
    readme = (ROOT / "README.md").read_text()
    missing = sorted(m for m in defined if m not in readme)
    assert not missing, f"metrics missing from the README: {missing}"
