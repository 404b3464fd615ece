"""The morning report rendered by a real browser: headless Chromium loads the HTML file, every embedded plot
decodes (the page's own script records each image's naturalWidth on load), the malicious answer does not run,
and a screenshot of the page is neither blank nor missing the plots' colours."""
from __future__ import annotations

import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from PIL import Image

from agent.report.morning import write_report
from agent.settings import Settings
from tests.support.report_fixtures import sample_batch

pytestmark = pytest.mark.browser

WIDTH, HEIGHT = 1280, 2400
HISTOGRAM_BLUE = (0x15, 0x65, 0xC0)  # the confidence histogram's bars (agent/report/plots.py)


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    message = "headless Chromium not found: install Debian's chromium package (ops/setup.sh does it for the dev extras as root)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def _run(chromium: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    flags = ["--headless", "--disable-gpu", "--hide-scrollbars", "--no-first-run", f"--user-data-dir={profile}"]
    if os.geteuid() == 0:
        flags.append("--no-sandbox")  # Chromium refuses to start as root with its sandbox
    done = subprocess.run([chromium, *flags, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


class _Dom(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.images: list[dict[str, str | None]] = []
        self.body: dict[str, str | None] = {}
        self.scripts = 0
        self.title = ""
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "img":
            self.images.append(dict(attrs))
        elif tag == "body":
            self.body = dict(attrs)
        elif tag == "script":
            self.scripts += 1
        self._in_title = tag == "title"

    def handle_endtag(self, tag: str) -> None:
        self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data


@pytest.fixture
def report_file(tmp_path: Path) -> Path:
    html_path, _ = write_report(sample_batch(), tmp_path / "report" / "night.html", Settings(_env_file=None))
    return html_path


def test_plots_decode_in_the_browser(report_file: Path, tmp_path: Path) -> None:
    chromium = _chromium()
    done = _run(chromium, tmp_path / "profile-dom", "--virtual-time-budget=5000", "--dump-dom", report_file.as_uri())
    dom = _Dom()
    dom.feed(done.stdout)
    assert dom.body.get("data-loaded") == "1", "the page's load handler did not run (blocked by its own CSP?)"
    assert [i.get("data-plot") for i in dom.images] == ["confidence", "time", "iterations"]
    for image in dom.images:
        assert int(image.get("data-natural-width") or 0) > 0, f"plot {image.get('data-plot')} did not decode"
    assert dom.title == "Batch report: overnight-test"  # the answer's <script> would have set it to 'pwned'
    assert dom.scripts == 1


def test_screenshot_shows_the_page_and_its_plots(report_file: Path, tmp_path: Path) -> None:
    chromium = _chromium()
    shot = tmp_path / "night.png"
    _run(chromium, tmp_path / "profile-shot", f"--screenshot={shot}", f"--window-size={WIDTH},{HEIGHT}",
         "--virtual-time-budget=5000", report_file.as_uri())
    with Image.open(shot) as img:
        pixels = img.convert("RGB")
        assert pixels.size == (WIDTH, HEIGHT)
        colours = pixels.getcolors(maxcolors=WIDTH * HEIGHT) or []
    counts = {rgb: n for n, rgb in colours}
    total = WIDTH * HEIGHT
    non_white = total - counts.get((255, 255, 255), 0)
    assert non_white > total * 0.02, f"screenshot is nearly blank: {non_white} non-white pixels of {total}"
    assert counts.get(HISTOGRAM_BLUE, 0) > 1000, "the confidence histogram's bars are not on the screenshot"
    if os.environ.get("REPORT_SCREENSHOT"):  # keep a copy to look at
        shutil.copy(shot, os.environ["REPORT_SCREENSHOT"])
