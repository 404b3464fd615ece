"""`finagent redis acl`: the ACL file Redis loads and the passwords in .env, as an operator runs it."""
from __future__ import annotations

from typer.testing import CliRunner

from ops.cli.main import app

runner = CliRunner()


def test_writes_the_users_keeps_the_passwords_and_prints_each_services_url(tmp_path):
    env, out = tmp_path / ".env", tmp_path / "redis-users.acl"
    env.write_text("POSTGRES_PASSWORD=pg\n")
    result = runner.invoke(app, ["redis", "acl", "--env", str(env), "--out", str(out)])
    assert result.exit_code == 0, result.output
    users = out.read_text().splitlines()
    assert users[0] == "user default off" and len(users) == 8
    assert "REDIS_PASSWORD_WORKER=" in env.read_text() and "REDIS_PASSWORD_ADMIN=" in env.read_text()
    assert "worker: redis://worker:${REDIS_PASSWORD_WORKER}@redis:6379/0" in result.output
    again = runner.invoke(app, ["redis", "acl", "--env", str(env), "--out", str(out), "--db", "3"])
    assert again.exit_code == 0 and "added to" not in again.output
    assert "api: redis://api:${REDIS_PASSWORD_API}@redis:6379/3" in again.output
    assert out.read_text().splitlines()[1:] != users[1:] and "&/3.celeryev/*" in out.read_text()


def test_a_password_that_cannot_go_into_a_url_is_refused(tmp_path):
    env, out = tmp_path / ".env", tmp_path / "redis-users.acl"
    env.write_text("REDIS_PASSWORD_FLOWER=p@ss/word:with-url-syntax\n")
    result = runner.invoke(app, ["redis", "acl", "--env", str(env), "--out", str(out)])
    assert result.exit_code == 2 and "REDIS_PASSWORD_FLOWER" in result.output
    assert not out.exists()
