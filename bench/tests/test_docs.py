"""docs/benchmarks.md: a bench re-run rewrites only what its script wrote there."""
import re

from bench import common

SECTION = re.compile(r"<!-- bench:(.+?):start -->\n(.*?)<!-- bench:\1:end -->", re.S)


def test_every_bench_section_holds_only_its_scripts_own_heading():
    # prose written by hand inside a section's markers is erased the next time its script runs
    text = common.DOCS.read_text()
    sections = SECTION.findall(text)
    assert len(sections) == text.count(":start -->") and sections
    for name, body in sections:
        headings = [line for line in body.splitlines() if line.startswith("#")]
        assert body.startswith("## ") and len(headings) == 1, (name, headings[:3])


def test_write_section_replaces_its_own_text_and_keeps_the_rest(tmp_path):
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# B\n\n<!-- bench:a:start -->\n## A\nold\n<!-- bench:a:end -->\n\n### by hand\nkept\n")
    common.write_section("a", "## A\nnew", doc)
    common.write_section("b", "## B2\nadded", doc)
    text = doc.read_text()
    assert "old" not in text and "## A\nnew" in text and "### by hand\nkept" in text
    assert text.rstrip().endswith("<!-- bench:b:end -->")
