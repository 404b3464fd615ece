"""The optional parts of the install (pyproject's extras): a module that needs one imports it through `require`, so a
host installed without that extra gets one line naming it instead of a bare ImportError."""
from __future__ import annotations

import importlib
from types import ModuleType

# what each extra brings, as the message says it
EXTRAS = {
    "embedded": "the embedded Postgres and Redis of the local stack",
    "local-model": "the local embedding model",
    "report": "the plots of the batch report and the evals",
    "flower": "Flower",
    "tracing": "OpenTelemetry traces, FINAGENT_TRACING=true",
}


class MissingExtra(ImportError):
    """A module of an extra that is not installed; str() is the one line to show."""

    def __init__(self, extra: str, module: str, instead: str = ""):
        self.extra = extra
        super().__init__(f"{module} is not installed: it comes with the '{extra}' extra ({EXTRAS.get(extra, extra)}): "
                         f"pip install 'finagent[{extra}]'" + (f", or {instead}" if instead else ""), name=module)


def require(module: str, extra: str, instead: str = "") -> ModuleType:
    """Import `module`, or raise MissingExtra naming the extra that installs it (and `instead`, another way out)."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if exc.name is not None and exc.name.split(".")[0] != module.split(".")[0]:
            raise  # the package is there but one of its own imports failed: that is not a missing extra
        raise MissingExtra(extra, module, instead) from exc
