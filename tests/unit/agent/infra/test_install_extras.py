"""What the install promises a host: the version, one line naming the extra a missing package comes with, and a
data dir of another Postgres major version refused by name before any server starts."""
from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from agent.infra.extras import MissingExtra, require
from agent.settings import Settings
from ops.local import stack

BIN = Path(sys.executable).parent


def test_finagent_version_prints_the_installed_distribution_version():
    r = subprocess.run([str(BIN / "finagent"), "--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"finagent {version('finagent')}"


def test_a_missing_package_names_its_extra_in_one_line():
    with pytest.raises(MissingExtra) as info:
        require("matplotlib_not_installed_here.figure", "report")
    message = str(info.value)
    assert "\n" not in message and info.value.extra == "report"
    assert message.startswith("matplotlib_not_installed_here.figure is not installed") and "pip install 'finagent[report]'" in message


def test_a_broken_import_inside_an_installed_package_is_not_called_a_missing_extra(tmp_path, monkeypatch):
    (tmp_path / "half_installed_pkg").mkdir()
    (tmp_path / "half_installed_pkg" / "__init__.py").write_text("import a_dependency_it_lost\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError) as info:
        require("half_installed_pkg", "report")
    assert not isinstance(info.value, MissingExtra) and info.value.name == "a_dependency_it_lost"


def test_the_cli_reports_a_missing_extra_in_one_line_with_exit_2(tmp_path):
    """`finagent flower` on a host without the flower extra: PYTHONPATH puts a stand-in `flower` first that fails to
    import as an absent package does."""
    shadow = tmp_path / "shadow"
    (shadow / "flower").mkdir(parents=True)
    (shadow / "flower" / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'flower'\", name='flower')\n")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(shadow), "FINAGENT_DATA_DIR": str(tmp_path / "data"), "HOME": str(tmp_path)}
    r = subprocess.run([str(BIN / "finagent"), "flower"], capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert "pip install 'finagent[flower]'" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_a_data_dir_of_another_postgres_major_version_is_refused_by_name(tmp_path):
    """Postgres 18 cannot open a data dir that pgserver's Postgres 16 made: say which dir, start nothing."""
    pg = tmp_path / "pg"
    pg.mkdir()
    (pg / "PG_VERSION").write_text("16\n")
    with pytest.raises(stack.EmbeddedServerError) as info:
        stack.start_embedded_postgres(Settings(_env_file=None, data_dir=tmp_path))
    message = str(info.value)
    assert "\n" not in message and str(pg) in message and "Postgres 16" in message and f"Postgres {stack.PG_MAJOR}" in message
    assert sorted(p.name for p in pg.iterdir()) == ["PG_VERSION"]  # no initdb, no server
