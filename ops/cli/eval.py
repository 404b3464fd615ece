"""`finagent eval ...`: measure research quality on public data nobody here wrote, one command per eval module."""
from __future__ import annotations

import typer

from ops.cli import eval_calibration, eval_financebench, eval_transcripts

eval_app = typer.Typer(no_args_is_help=True, help="Measure retrieval and answer quality on real filings and calls.")
eval_app.command("financebench")(eval_financebench.financebench)
eval_app.command("calibration")(eval_calibration.calibration)
eval_app.command("transcripts")(eval_transcripts.eval_transcripts)
