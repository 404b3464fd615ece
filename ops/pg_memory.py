"""Memory settings of the embedded Postgres, sized from the machine's RAM.

A search is fast only while the HNSW graph and the GIN index it reads stay in Postgres's buffer cache, and an HNSW
index builds fast only while its graph fits in maintenance_work_mem (pgvector falls back to a much slower on-disk
build). Both grow linearly with the corpus: bench/search.py --scale 1m measured, at a million 384-dimension chunks,
1.7 GB of HNSW graph, 0.23 GB of GIN and 0.06 GB of btrees (about 2 GB that every warm search reads) beside a
3.6 GB table (docs/benchmarks.md, "search-1m"). "auto" therefore gives the buffer cache a quarter of the RAM (at
most 8 GB) and index builds an eighth (at most 4 GB): from a 16 GB machine up, a million chunks' indexes stay in
the cache and their graph builds in memory.
"""
from __future__ import annotations

import os

MB = 1 << 20
GB = 1 << 30


def physical_memory() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def pg_size(n_bytes: int) -> str:
    """A size the way Postgres's SHOW prints it (the largest unit that divides it): whole GB, else whole MB."""
    mb = max(1, n_bytes // MB)
    return f"{mb // 1024}GB" if mb % 1024 == 0 else f"{mb}MB"


def share_of_ram(ram: int, fraction: float, floor: int, ceiling: int) -> str:
    """`fraction` of `ram` within [floor, ceiling], rounded down to whole GB (whole 128 MB below 1 GB)."""
    size = min(max(int(ram * fraction), floor), ceiling)
    step = GB if size >= GB else 128 * MB
    return pg_size(max(step, size // step * step))


def resolve(value: str, ram: int, fraction: float, floor: int, ceiling: int) -> str:
    return share_of_ram(ram, fraction, floor, ceiling) if value == "auto" else value


def shared_buffers(value: str, ram: int | None = None) -> str:
    return resolve(value, ram or physical_memory(), 0.25, 128 * MB, 8 * GB)


def maintenance_work_mem(value: str, ram: int | None = None) -> str:
    return resolve(value, ram or physical_memory(), 0.125, 64 * MB, 4 * GB)
