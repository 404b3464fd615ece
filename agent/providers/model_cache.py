"""A file built once and shared by every thread and process: an inter-process lock, an atomic rename, and a
manifest (size and sha256) that tells a finished file from a partial or corrupt one, which is then rebuilt."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ValidationError

_thread_locks: dict[Path, threading.Lock] = {}
_registry_lock = threading.Lock()


class Manifest(BaseModel):
    size: int
    sha256: str


def _manifest_path(path: Path) -> Path:
    return path.with_name(path.name + ".manifest.json")


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def is_complete(path: Path) -> bool:
    """The file exists and matches the manifest written after it was renamed into place."""
    try:
        manifest = Manifest.model_validate_json(_manifest_path(path).read_text())
        return path.stat().st_size == manifest.size and _digest(path) == manifest.sha256
    except (OSError, ValueError, ValidationError):
        return False


def _thread_lock(path: Path) -> threading.Lock:
    # fcntl locks are per process: threads of one process also need a lock of their own
    with _registry_lock:
        return _thread_locks.setdefault(path, threading.Lock())


def discard(path: Path) -> None:
    """Forget a cached file (e.g. one that passed its manifest but would not load), so the next use rebuilds it."""
    for p in (_manifest_path(path), path):
        p.unlink(missing_ok=True)


def cached_file(path: Path, build: Callable[[Path], None]) -> Path:
    """`path`, built by `build(tmp_path)` if it is missing, partial or corrupt. Concurrent callers (threads or
    processes) wait for the one that builds; a crash mid-build leaves only a temporary directory behind."""
    if is_complete(path):
        return path
    import fasteners

    path.parent.mkdir(parents=True, exist_ok=True)
    with _thread_lock(path), fasteners.InterProcessLock(str(path.with_name(path.name + ".lock"))):
        if is_complete(path):  # built by another caller while this one waited
            return path
        discard(path)
        work = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
        try:
            tmp = work / path.name
            build(tmp)
            manifest = Manifest(size=tmp.stat().st_size, sha256=_digest(tmp))
            os.replace(tmp, path)
            tmp_manifest = work / "manifest.json"
            tmp_manifest.write_text(json.dumps(manifest.model_dump()))
            os.replace(tmp_manifest, _manifest_path(path))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return path
