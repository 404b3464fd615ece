"""`finagent redis acl`: the Redis ACL users, one per role (ops/redis/acl_users.py), for Redis's `aclfile`, with their
passwords kept in `.env`, where ops/compose/redis-acl.override.yml reads them."""
from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from ops.cli import exit_codes

redis_app = typer.Typer(no_args_is_help=True, help="Redis as the services reach it: its ACL users, one per role.")


@redis_app.command("acl")
def acl(env_file: Path = typer.Option(Path(".env"), "--env", help="where the passwords are kept (REDIS_PASSWORD_<ROLE>); "
                                      "a missing one is generated and added"),
        out: Path = typer.Option(Path("redis-users.acl"), "--out", help="the ACL file to write (password digests only)"),
        db: int = typer.Option(0, "--db", min=0, help="the database number the services' URLs name")):
    """Write the ACL file Redis loads (`redis-server --aclfile`): the default user off, and a user for the service
    client, the workers, the API, Flower, beat, the health check and an operator (admin), each with only what it uses.
    Prints the URL each service connects with."""
    from ops.redis.acl_users import Role, acl_file, ensure_passwords, password_variable, role_url

    console = Console()
    try:
        passwords, added = ensure_passwords(env_file)
    except ValueError as exc:
        Console(stderr=True).print(str(exc), style="red", markup=False, highlight=False)
        raise typer.Exit(code=exit_codes.BAD_INPUT) from None
    out.write_text(acl_file(passwords, db=db))
    out.chmod(0o644)  # digests only; the Redis container's own user reads it
    console.print(f"wrote {out}", markup=False, highlight=False)
    if added:
        console.print(f"added to {env_file}: {', '.join(added)}", markup=False, highlight=False)
    for role in passwords:  # the URL as ops/compose/redis-acl.override.yml spells it, password from .env
        if role is not Role.admin:
            url = role_url(role, "PASSWORD", db=db).replace("PASSWORD", "${" + password_variable(role) + "}", 1)
            console.print(f"{role.value:>7}: {url}", markup=False, highlight=False)
