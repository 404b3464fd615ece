"""The image's build, read from the Dockerfile (no Docker engine runs here, so the image is never built in these
tests): the locked packages installed by hash, the projects as wheels (not editable), the embedding model prepared
at build time outside the volumes, a health check."""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = (REPO / "Dockerfile").read_text()


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the final stage, continuation lines joined and comments dropped."""
    joined = re.sub(r"\\\n", " ", DOCKERFILE)
    rows = [line.strip() for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    stages = [i for i, row in enumerate(rows) if row.startswith("FROM ")]
    return [(row.split(None, 1)[0], row.split(None, 1)[1]) for row in rows[stages[-1]:]]


def runs() -> list[str]:
    return [args for op, args in instructions() if op == "RUN"]


def test_third_party_packages_come_from_the_hashed_lock_only():
    installs = [r for r in runs() if "pip install" in r]
    locked = [r for r in installs if "-r /tmp/image.lock" in r]
    assert len(locked) == 1 and "--require-hashes" in locked[0]
    assert ("COPY", "ops/locks/image.lock /tmp/image.lock") in instructions()
    others = [r for r in installs if r not in locked]
    assert others and all("--no-deps" in r and "/tmp/wheels/" in r for r in others)  # ours, with nothing resolved


def test_nothing_is_installed_editable():
    assert not any(re.search(r"pip install[^&]*\s(-e|--editable)\s", r) for r in runs())
    assert re.search(r"^RUN pip wheel .*-w /wheels", DOCKERFILE, flags=re.M)


def test_the_embedding_model_is_prepared_at_build_time_outside_the_volumes():
    envs = " ".join(args for op, args in instructions() if op == "ENV")
    cache = re.search(r"FINAGENT_MODEL_CACHE_DIR=(\S+)", envs)
    assert cache and not cache.group(1).startswith(("/data", "/metrics"))  # compose mounts volumes there
    order = [op + " " + args for op, args in instructions()]
    prepare = next(i for i, row in enumerate(order) if "prepare_default()" in row)
    install = max(i for i, row in enumerate(order) if "pip install" in row)
    user = next(i for i, row in enumerate(order) if row.startswith("USER "))
    assert install < prepare < user  # with every package in place; as root, then handed to the app user
    assert any(f"chown -R finagent {cache.group(1)}" in r for r in runs())


def test_the_image_has_a_health_check():
    (check,) = [args for op, args in instructions() if op == "HEALTHCHECK"]
    assert "/healthz" in check and "--interval=" in check
