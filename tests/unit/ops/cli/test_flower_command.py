"""`finagent flower`: the Flower command line built from the settings, and the refusal to expose Flower
without basic auth (ops/cli/flower.py; tests/integration/test_flower.py runs it for real)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.settings import Settings
from ops.cli.flower import FlowerConfigError, flower_command, is_loopback

REPO = Path(__file__).resolve().parents[4]


def settings(tmp_path: Path, **kw) -> Settings:
    return Settings(_env_file=None, data_dir=tmp_path, **kw)  # type: ignore[call-arg]


def test_flower_runs_on_the_broker_with_persistent_state_under_the_data_dir(tmp_path):
    cmd = flower_command(settings(tmp_path, flower_port=5600), "redis://broker:6379/0")
    argv = cmd.argv
    assert argv[:4] == [sys.executable, "-m", "celery", "-A"] and argv[argv.index("--broker") + 1] == "redis://broker:6379/0"
    flower_args = argv[argv.index("flower") + 1:]
    assert set(flower_args) == {"--address=127.0.0.1", "--port=5600", "--persistent=True", f"--db={tmp_path / 'flower.db'}",
                                "--state_save_interval=60000"}
    assert cmd.db == tmp_path / "flower.db" and cmd.env == {}
    assert "--port=5700" in flower_command(settings(tmp_path), "redis://b", port=5700).argv


def test_basic_auth_goes_to_flower_through_the_environment_not_the_command_line(tmp_path):
    cmd = flower_command(settings(tmp_path, flower_basic_auth=" ops:pw1 , viewer:pw2 "), "redis://b", host="0.0.0.0")
    assert cmd.env == {"FLOWER_BASIC_AUTH": "ops:pw1,viewer:pw2"}
    assert not any("pw1" in a or "pw2" in a for a in cmd.argv)
    assert "--address=0.0.0.0" in cmd.argv


@pytest.mark.parametrize("host", ["0.0.0.0", "", "10.1.2.3", "flower.internal", "::"])
def test_no_basic_auth_off_loopback_is_refused(tmp_path, host):
    with pytest.raises(FlowerConfigError, match="without basic auth.*FINAGENT_FLOWER_BASIC_AUTH"):
        flower_command(settings(tmp_path), "redis://b", host=host)


@pytest.mark.parametrize("value", ["ops", "ops:", ":pw", "ops:pw,viewer", ","])
def test_a_malformed_basic_auth_is_refused_naming_the_setting(tmp_path, value):
    with pytest.raises(FlowerConfigError, match="FINAGENT_FLOWER_BASIC_AUTH"):
        flower_command(settings(tmp_path, flower_basic_auth=value), "redis://b")


def test_loopback_addresses():
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.0.0.2", "::1", "localhost", "LOCALHOST"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "", "::", "192.168.1.1", "example.com"))


def test_the_cli_exits_2_with_one_line_before_starting_anything(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")} | {"FINAGENT_DATA_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-m", "ops.cli.main", "flower", "--host", "0.0.0.0"], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "refusing to serve Flower on 0.0.0.0 without basic auth" in lines[0], out.stderr
    assert list(tmp_path.iterdir()) == []  # no embedded server, worker or state file was started or written


def test_flower_runs_without_finagents_metrics_directory(tmp_path):
    """Flower's own prometheus metrics must not be written among finagent's multiprocess files."""
    from ops.cli.flower import FlowerCommand

    cmd = FlowerCommand(argv=["flower"], env={"FLOWER_BASIC_AUTH": "ops:pw"}, db=tmp_path / "flower.db")
    env = cmd.environ({"PATH": "/bin", "PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "FLOWER_PORT": "1"})
    assert env == {"PATH": "/bin", "FLOWER_BASIC_AUTH": "ops:pw"}
