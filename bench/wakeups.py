"""What one hand-off between two processes costs on this machine, on the same CPU and across CPUs, hot and after
the machine has idled: the unit every queue hop is made of (each Redis or Postgres round trip is two hand-offs).

Two processes pinned to CPUs (`os.sched_setaffinity`) bounce one byte over a pair of pipes. After each idle gap, a
burst of round trips is timed one by one, so the first round trip after idling shows apart from the rest. On a virtual
machine whose idle vCPUs halt at once (no halt polling), a wake-up across CPUs costs an inter-processor interrupt
through the host; on the same CPU it does not.

    python bench/wakeups.py [--bursts 15] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

GAPS_S = (0.0, 0.01, 0.3, 1.0)
BURST = 12


def round_trips(cpu_a: int, cpu_b: int, gap_s: float, bursts: int) -> list[float]:
    """The median of each position in a burst of round trips (µs), over `bursts` bursts each after `gap_s` idle."""
    to_child, from_parent = os.pipe()
    to_parent, from_child = os.pipe()
    pid = os.fork()
    if pid == 0:  # the echo: one byte back for each byte in, until 'q'
        os.sched_setaffinity(0, {cpu_b})
        while (b := os.read(to_child, 1)) != b"q":
            os.write(from_child, b)
        os._exit(0)
    previous = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu_a})
    try:
        timed: list[list[float]] = []
        for _ in range(bursts):
            time.sleep(gap_s)
            burst = []
            for _ in range(BURST):
                t = time.perf_counter()
                os.write(from_parent, b"x")
                os.read(to_parent, 1)
                burst.append((time.perf_counter() - t) * 1e6)
            timed.append(burst)
    finally:
        os.write(from_parent, b"q")
        os.waitpid(pid, 0)
        os.sched_setaffinity(0, previous)
        for fd in (to_child, from_parent, to_parent, from_child):
            os.close(fd)
    return [round(statistics.median(b[i] for b in timed), 1) for i in range(BURST)]


def idle_driver() -> dict:
    """The cpuidle driver and, for haltpoll, how long an idle vCPU polls before it halts (0: it halts at once)."""
    def read(path: str) -> str | None:
        p = Path(path)
        return p.read_text().strip() if p.exists() else None
    return {"cpuidle_driver": read("/sys/devices/system/cpu/cpuidle/current_driver"),
            "guest_halt_poll_ns": read("/sys/module/haltpoll/parameters/guest_halt_poll_ns")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bursts", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    cpus = sorted(os.sched_getaffinity(0))
    pairs = {"same CPU": (cpus[0], cpus[0])} | ({"across CPUs": (cpus[0], cpus[1])} if len(cpus) > 1 else {})
    rows = []
    for gap in GAPS_S:
        for label, (a, b) in pairs.items():
            burst = round_trips(a, b, gap, args.bursts)
            rows.append({"gap_s": gap, "pair": label, "first_us": burst[0], "rest_us": statistics.median(burst[1:])})
    out = {"cpus": len(cpus), "machine": platform.platform(), **idle_driver(), "rows": rows}
    if args.json:
        print(json.dumps(out))
        return
    print(f"{out['machine']}, {len(cpus)} CPUs, cpuidle {out['cpuidle_driver']}, "
          f"guest_halt_poll_ns {out['guest_halt_poll_ns']}")
    print(f"{'idle before (s)':>15}  {'pair':12} {'first round trip (us)':>22} {'the rest (us)':>14}")
    for r in rows:
        print(f"{r['gap_s']:>15}  {r['pair']:12} {r['first_us']:>22} {r['rest_us']:>14}")


if __name__ == "__main__":
    main()
