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
from pathlib import Path

from pydantic import BaseModel

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


class HugePages(BaseModel):
    """Whether the embedded Postgres's shared memory (its buffer cache, which holds the 2 GB of HNSW, GIN and btree
    pages that searches read at a million chunks) sits on 2 MB pages. On 4 kB pages a search that touches thousands of buffers spread
    over gigabytes misses the TLB at almost every one: at 1M chunks, huge pages took 0.88-0.92x Postgres's CPU per
    search and 0.92-0.93x the p95, two runs of bench/search_hugepages.py (in git history). Only root can
    reserve them (vm.nr_hugepages), so the embedded server takes them when they are there ("try") and says here how
    many it needs."""

    setting: str  # huge_pages: try | on | off
    needed: int  # pages of the default huge page size its shared memory takes (shared_memory_size_in_huge_pages)
    reserved: int  # the host's reserved huge pages (HugePages_Total), shared with any other user of them
    in_use: bool | None  # the postmaster maps huge pages; None when its /proc entry cannot be read
    advice: str


def proc_kb(text: str, field: str) -> int:
    """A `Field:  123 kB` (or bare count) line of a /proc status or meminfo text, 0 when absent."""
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == field:
            return int(value.split()[0])
    return 0


def huge_pages_advice(setting: str, needed: int, reserved: int, in_use: bool | None) -> str:
    if in_use:
        return f"in use: the buffer cache is on {needed} huge pages"
    if needed < 0:  # Postgres's -1: huge pages are not supported on this platform
        return "not supported on this platform"
    if setting == "off":
        return "off (EMBEDDED_PG_HUGE_PAGES=off)"
    if reserved < needed:
        return (f"not in use: the host reserves {reserved} huge pages and the server needs {needed}; as root, "
                f"`sysctl -w vm.nr_hugepages={needed}` (plus any other user's), then restart the services")
    if in_use is None:
        return "unknown: the server's process cannot be read from here"
    return "not in use although the host reserves enough: restart the services to take them"


def huge_pages_status(conn, postmaster_pid: int | None, proc: Path = Path("/proc")) -> HugePages:
    """`conn`: a connection to the server (tuple rows); its postmaster's pid when it runs on this host (else in_use is None)."""
    setting = conn.execute("SHOW huge_pages").fetchone()[0]
    needed = int(conn.execute("SHOW shared_memory_size_in_huge_pages").fetchone()[0])
    try:
        reserved = proc_kb((proc / "meminfo").read_text(), "HugePages_Total")
    except OSError:
        reserved = 0
    in_use = None
    if postmaster_pid is not None:
        try:
            in_use = proc_kb((proc / str(postmaster_pid) / "status").read_text(), "HugetlbPages") > 0
        except OSError:
            pass
    return HugePages(setting=setting, needed=needed, reserved=reserved, in_use=in_use,
                     advice=huge_pages_advice(setting, needed, reserved, in_use))
