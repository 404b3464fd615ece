"""docker-compose.yml read the way `docker compose` reads it, for the cluster harness (bench/cluster.py): the `x-app` /
`x-worker` anchors merged (YAML merge keys), `${VAR}`, `${VAR:-default}`, `${VAR-default}`, `${VAR:?message}` and
`$$` substituted from an environment the harness provides (standing in for the shell and `.env`), and each service's
command, environment (its `env_file` values under its `environment`) and volumes returned. Pure: no process starts here.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field

COMPOSE_FILE = Path(__file__).resolve().parents[1] / "docker-compose.yml"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class InterpolationError(ValueError):
    """A `${VAR:?message}` whose variable is unset or empty, or a malformed `${...}`."""


class ServiceDef(BaseModel):
    name: str
    command: list[str] = Field(default_factory=list)
    environment: dict[str, str] = Field(default_factory=dict)
    volumes: dict[str, str] = Field(default_factory=dict)  # container path -> named volume
    restart: str = "no"  # compose's restart policy: "no", "always", "on-failure", "unless-stopped"

    @property
    def restarts(self) -> bool:
        """Whether the container engine would start the service again after it exited on its own."""
        return self.restart in ("always", "unless-stopped") or self.restart.startswith("on-failure")

    @property
    def is_worker(self) -> bool:
        return self.command[1:2] == ["worker"]


def _closing_brace(text: str, start: int) -> int:
    """The index of the `}` closing the `${` whose body starts at `start` (bodies may nest `${...}`)."""
    depth, i = 1, start
    while i < len(text):
        if text.startswith("${", i):
            depth, i = depth + 1, i + 2
            continue
        if text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise InterpolationError(f"unclosed ${{ in {text!r}")


def _expand(body: str, env: Mapping[str, str]) -> str:
    name = _NAME.match(body)
    if name is None:
        raise InterpolationError(f"bad variable in ${{{body}}}")
    var, rest = name.group(0), body[name.end():]
    value = env.get(var)
    if rest == "":
        return value or ""
    for op in (":-", ":?", "-", "?"):
        if rest.startswith(op):
            arg = interpolate(rest[len(op):], env)
            unset = value is None or (op.startswith(":") and value == "")
            if op.endswith("-"):
                return arg if unset else str(value)
            if unset:
                raise InterpolationError(f"{var}: {arg}")
            return str(value)
    raise InterpolationError(f"bad operator in ${{{body}}}")


def interpolate(text: str, env: Mapping[str, str]) -> str:
    """Compose's variable substitution of one string."""
    out, i = [], 0
    while i < len(text):
        if text.startswith("$$", i):
            out.append("$")
            i += 2
        elif text.startswith("${", i):
            end = _closing_brace(text, i + 2)
            out.append(_expand(text[i + 2:end], env))
            i = end + 1
        elif text[i] == "$" and (m := _NAME.match(text, i + 1)):
            out.append(env.get(m.group(0), ""))
            i = m.end()
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _interpolate_tree(node: Any, env: Mapping[str, str]) -> Any:
    if isinstance(node, str):
        return interpolate(node, env)
    if isinstance(node, list):
        return [_interpolate_tree(v, env) for v in node]
    if isinstance(node, dict):
        return {k: _interpolate_tree(v, env) for k, v in node.items()}
    return node


def _as_env(raw: Any) -> dict[str, str]:
    if raw is None:
        return {}
    if isinstance(raw, list):  # ["KEY=value", ...]
        return dict(item.split("=", 1) if "=" in item else (item, "") for item in raw)
    return {str(k): "" if v is None else str(v) for k, v in raw.items()}


def _volumes(raw: list[Any] | None, named: set[str]) -> dict[str, str]:
    out = {}
    for item in raw or []:
        source, _, target = str(item).partition(":")
        if source in named:
            out[target.split(":")[0]] = source
    return out


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Compose's merge of one service's definition from a later file: `environment` merged key by key, every other
    key (command, healthcheck, ...) replaced."""
    out = dict(base)
    for key, value in override.items():
        if key == "environment":
            out[key] = _as_env(base.get(key)) | _as_env(value)
        else:
            out[key] = value
    return out


def load_services(env: Mapping[str, str], path: Path = COMPOSE_FILE, only: set[str] | None = None,
                  overrides: Sequence[Path] = ()) -> dict[str, ServiceDef]:
    """Every service (or those in `only`; a `:?` in another service's definition then does not matter) with its
    command, environment and named volumes as compose would give them under `env`, with `overrides` applied in order
    as `docker compose -f path -f override ...` does. `env` is also the `env_file`."""
    doc = yaml.safe_load(path.read_text())  # the safe loader resolves anchors and `<<` merge keys
    named = set((doc.get("volumes") or {}).keys())
    raws = dict(doc["services"])
    for extra in overrides:
        for name, raw in (yaml.safe_load(extra.read_text()).get("services") or {}).items():
            raws[name] = _merge(raws.get(name, {}), raw)
    services = {}
    for name, raw in raws.items():
        if only is not None and name not in only:
            continue
        svc = _interpolate_tree(raw, env)
        environment = dict(env) if svc.get("env_file") else {}
        environment.update(_as_env(svc.get("environment")))
        command = svc.get("command") or []
        services[name] = ServiceDef(name=name, command=command.split() if isinstance(command, str) else [str(c) for c in command],
                                    environment=environment, volumes=_volumes(svc.get("volumes"), named),
                                    restart=str(svc.get("restart", "no")))
    return services
