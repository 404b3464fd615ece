"""The `finagent` command's exit statuses (docs/analysts.md lists them)."""
from __future__ import annotations

OK = 0
FAILED = 1  # the command ran and the outcome is a failure: a job failed or was rejected, no such job, no results
BAD_INPUT = 2  # a bad argument or file, a setting the embedded servers cannot run with, a missing extra
UNAVAILABLE = 3  # Postgres or Redis is down or unreachable
TIMED_OUT = 4  # a job did not finish within the time the command waits for it (it goes on in the workers)
INTERRUPTED = 130  # Ctrl-C
