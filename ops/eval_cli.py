"""`finagent eval ...`: measure research quality on public data nobody here wrote. Each eval module registers
its command on `eval_app`; the imports at the bottom load them."""
from __future__ import annotations

import typer

eval_app = typer.Typer(no_args_is_help=True, help="Measure retrieval and answer quality on real filings and calls.")

from ops import eval_financebench  # noqa: E402,F401,I001  (registers `finagent eval financebench`)
from ops import eval_calibration  # noqa: E402,F401  (registers `finagent eval calibration`)
from ops import eval_transcripts  # noqa: E402,F401  (registers `finagent eval transcripts`)
