"""Secrets from files: FINAGENT_<NAME>_FILE for every secret setting (Docker and Kubernetes secrets)."""
from __future__ import annotations

import pytest

from agent.settings import SECRET_FILE_SETTINGS, SecretFileError, Settings, _is_secret, env_var, secret_file_values


def test_every_secret_setting_may_come_from_a_file():
    secrets = {name for name in Settings.model_fields if _is_secret(name)}
    assert secrets | {"database_url", "redis_url"} == set(SECRET_FILE_SETTINGS)


def test_each_file_is_read_without_its_trailing_newline(tmp_path, monkeypatch):
    files = {"database_url": "postgresql://finagent:s3cret@db.example.invalid:5432/finagent?sslmode=verify-full\n",
             "redis_url": "rediss://:r3dis@cache.example.invalid:6380/0\n",
             "llm_api_key": "sk-from-a-file\n", "flower_basic_auth": "ops:flowerpw\n"}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
        monkeypatch.setenv(env_var(name) + "_FILE", str(tmp_path / name))
    settings = Settings(data_dir=tmp_path)
    assert settings.database_url == files["database_url"].strip() and settings.redis_url == files["redis_url"].strip()
    assert settings.llm_api_key is not None and settings.llm_api_key.get_secret_value() == "sk-from-a-file"
    assert settings.flower_basic_auth is not None and settings.flower_basic_auth.get_secret_value() == "ops:flowerpw"
    assert "s3cret" not in str(settings.masked())


def test_the_file_wins_over_the_plain_variable(tmp_path, monkeypatch):
    (tmp_path / "db").write_text("postgresql://finagent:pw@db-from-file.invalid/finagent")
    monkeypatch.setenv("FINAGENT_DATABASE_URL", "postgresql://finagent:pw@compose-default.invalid/finagent")
    monkeypatch.setenv("FINAGENT_DATABASE_URL_FILE", str(tmp_path / "db"))
    assert Settings(data_dir=tmp_path).database_url == "postgresql://finagent:pw@db-from-file.invalid/finagent"


@pytest.mark.parametrize("name", ["api_keys", "admin_api_keys"])
@pytest.mark.parametrize("text", ['["key-one", "key-two"]\n', "key-one\n\nkey-two\n"])
def test_api_keys_as_a_json_list_or_one_per_line(tmp_path, monkeypatch, text, name):
    (tmp_path / "keys").write_text(text)
    monkeypatch.setenv(env_var(name) + "_FILE", str(tmp_path / "keys"))
    assert [k.get_secret_value() for k in getattr(Settings(data_dir=tmp_path), name)] == ["key-one", "key-two"]


def test_a_missing_unreadable_empty_or_broken_file_is_one_line_naming_variable_and_file(tmp_path):
    (tmp_path / "empty").write_text("\n")
    (tmp_path / "broken").write_text('["key-one",')
    (tmp_path / "adir").mkdir()
    cases = {"FINAGENT_REDIS_URL_FILE": (tmp_path / "absent", "does not exist"),
             "FINAGENT_TAVILY_API_KEY_FILE": (tmp_path / "adir", "cannot be read: Is a directory"),
             "FINAGENT_OPENAI_API_KEY_FILE": (tmp_path / "empty", "is empty"),
             "FINAGENT_API_KEYS_FILE": (tmp_path / "broken", "is not a JSON list of keys")}
    for variable, (path, reason) in cases.items():
        with pytest.raises(SecretFileError) as raised:
            secret_file_values({variable: str(path)})
        message = str(raised.value)
        assert message.startswith(f"{variable} names {path}, which ") and reason in message and "\n" not in message


def test_no_file_variable_no_value(tmp_path):
    assert secret_file_values({"FINAGENT_LLM_API_KEY": "sk-plain", "FINAGENT_DATABASE_URL_FILE": ""}) == {}
