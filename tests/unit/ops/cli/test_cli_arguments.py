"""The `finagent` command's argument checks that need no service (each fails in one line with exit status 2 before
anything starts), its distinct exit statuses, and --version."""
from __future__ import annotations

from importlib.metadata import version
from types import SimpleNamespace

import pytest
import typer
from typer.testing import CliRunner

from ops.cli import exit_codes
from ops.cli.ask import _report
from ops.cli.main import app, quarters_option, statuses_option

runner = CliRunner()


def _fails_on_input(args: list[str]) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == exit_codes.BAD_INPUT, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception  # no traceback
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    return lines[0]


def test_search_names_a_bad_period():
    assert "'blah' is not a period" in _fails_on_input(["search", "margins", "--quarters", "blah"])
    assert "'Q5 2024' is not a quarter" in _fails_on_input(["search", "margins", "--quarters", "Q5 2024"])
    assert "'nope' is not a period" in _fails_on_input(["search", "margins", "--quarters", "2024_q4,nope"])


def test_quarters_option_keeps_every_documented_form():
    assert quarters_option("last3") == ["last 3 quarters"]
    assert quarters_option("2024_q4,2025_q1") == ["Q4 2024", "Q1 2025"]
    for form in ("latest", "Q4 2024", "FY2023"):
        assert quarters_option(form) == [form]
    with pytest.raises(ValueError, match="names no period"):
        quarters_option(" , ")


def test_jobs_list_takes_several_statuses_as_the_api_does():
    assert statuses_option(["queued,running", "failed", "queued"]) == ["queued", "running", "failed"]
    assert statuses_option([]) == []
    assert "unknown status 'finished', 'nope'" in _fails_on_input(["jobs", "list", "--status", "queued,finished", "--status", "nope"])


def test_a_job_that_did_not_finish_in_time_has_its_own_exit_status():
    assert len({exit_codes.FAILED, exit_codes.BAD_INPUT, exit_codes.UNAVAILABLE, exit_codes.TIMED_OUT}) == 4
    unfinished = SimpleNamespace(id="j1", result=None, status="running", step="1:search")
    with pytest.raises(typer.Exit) as exc:
        _report(unfinished, as_json=False, timeout_s=5)  # type: ignore[arg-type]
    assert exc.value.exit_code == exit_codes.TIMED_OUT


def test_version_prints_the_installed_version():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"finagent {version('finagent')}"
