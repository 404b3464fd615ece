"""Settings: FINAGENT_ environment, the seed tables, secret masking, phase limits."""
from __future__ import annotations

import json
import os

import pytest

from agent.settings import AnswerMode, PhaseLimits, Settings


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    """No FINAGENT_* variables from the outer environment and no .env file in the working dir."""
    for key in list(os.environ):
        if key.startswith("FINAGENT_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    return monkeypatch


def test_env_prefix_is_read(clean_env, tmp_path):
    clean_env.setenv("FINAGENT_TOP_K_PER_QUARTER", "7")
    clean_env.setenv("FINAGENT_EMBEDDING_PROVIDER", "hash")
    clean_env.setenv("FINAGENT_DATA_DIR", str(tmp_path / "d"))
    clean_env.setenv("FINAGENT_SEMANTIC_WEIGHT", "0.6")
    clean_env.setenv("TOP_K_PER_QUARTER", "99")  # no prefix: ignored
    s = Settings()
    assert s.top_k_per_quarter == 7
    assert s.embedding_provider == "hash"
    assert s.data_dir == tmp_path / "d"
    assert s.semantic_weight == 0.6


def test_nested_env_delimiter(clean_env):
    clean_env.setenv("FINAGENT_PHASES__EXECUTION", "7")
    clean_env.setenv("FINAGENT_LLM_MODELS__PLANNER", "gpt-x")
    s = Settings()
    assert s.phases.execution == 7 and s.phases.planning == 2
    assert s.llm_models.planner == "gpt-x" and s.llm_models.generator == "gpt-4o-mini"


def test_dotenv_file_is_read_but_env_wins(clean_env, tmp_path):
    (tmp_path / ".env").write_text("FINAGENT_TOP_K_PER_QUARTER=11\nFINAGENT_CHUNK_SIZE=500\n")
    clean_env.setenv("FINAGENT_CHUNK_SIZE", "800")
    s = Settings()
    assert s.top_k_per_quarter == 11
    assert s.chunk_size == 800


def test_invalid_env_value_is_rejected(clean_env):
    clean_env.setenv("FINAGENT_EMBEDDING_PROVIDER", "nonsense")
    with pytest.raises(ValueError):
        Settings()


def test_answer_mode_table(clean_env):
    s = Settings()
    table = {m.value: (c.max_iterations, c.max_tokens, c.confidence_threshold) for m, c in s.modes.items()}
    assert table == {
        "direct": (2, 2000, 0.70),
        "standard": (3, 6000, 0.80),
        "detailed": (4, 16000, 0.90),
        "deep_search": (10, 20000, 0.95),
    }
    assert s.mode("detailed").max_tokens == 16000
    assert s.mode(AnswerMode.direct).max_iterations == 2
    assert s.default_mode == AnswerMode.standard


def test_replacing_a_mode_does_not_leak_into_other_instances(clean_env):
    a = Settings()
    a.modes[AnswerMode.direct] = a.modes[AnswerMode.direct].model_copy(update={"max_iterations": 99})
    assert Settings().mode("direct").max_iterations == 2


def test_mutating_a_mode_does_not_leak_into_other_instances(clean_env):
    from agent.settings import DEFAULT_MODES

    saved = DEFAULT_MODES[AnswerMode.direct].max_iterations
    try:
        Settings().mode("direct").max_iterations = 99
        assert Settings().mode("direct").max_iterations == 2
    finally:
        DEFAULT_MODES[AnswerMode.direct].max_iterations = saved


def test_retrieval_defaults(clean_env):
    s = Settings()
    assert (s.semantic_weight, s.keyword_weight) == (0.7, 0.3)
    assert s.top_k_per_quarter == 15
    assert s.embedding_dim == 384
    assert (s.chunk_size, s.chunk_overlap) == (1000, 150)


def test_masked_hides_api_keys(clean_env):
    clean_env.setenv("FINAGENT_LLM_API_KEY", "sk-live-supersecret")
    s = Settings(openai_api_key="sk-openai-secret", tavily_api_key="tvly-secret")
    m = s.masked()
    dumped = json.dumps(m)
    for secret in ("sk-live-supersecret", "sk-openai-secret", "tvly-secret"):
        assert secret not in dumped
    assert m["llm_api_key"] == m["openai_api_key"] == m["tavily_api_key"] == "********"
    assert s.llm_api_key.get_secret_value() == "sk-live-supersecret"  # the real value is still there


def test_masked_leaves_unset_keys_empty(clean_env):
    assert Settings().masked()["llm_api_key"] is None


def test_masked_hides_url_passwords(clean_env):
    s = Settings(database_url="postgresql://app:pg-pass-123@db.internal:5432/finagent",
                 redis_url="redis://:redis-pass-456@cache:6379/0")
    m = s.masked()
    assert m["database_url"] == "postgresql://app:********@db.internal:5432/finagent"
    assert m["redis_url"] == "redis://:********@cache:6379/0"
    assert "pg-pass-123" not in json.dumps(m) and "redis-pass-456" not in json.dumps(m)


def test_masked_keeps_urls_without_password(clean_env):
    s = Settings(database_url="postgresql://app@db/finagent", redis_url="unix:///tmp/r.sock")
    m = s.masked()
    assert m["database_url"] == "postgresql://app@db/finagent"
    assert m["redis_url"] == "unix:///tmp/r.sock"


def test_masked_hides_password_containing_at_sign(clean_env):
    m = Settings(database_url="postgresql://app:p@ss-word@db/finagent").masked()
    assert "ss-word" not in m["database_url"]


def test_effective_max_iterations():
    assert PhaseLimits().effective_max_iterations() == 9  # 1+5+2 = 8, +10% (at least 1)
    assert PhaseLimits().effective_max_iterations(4) == 4  # explicit wins
    assert PhaseLimits(planning=2, execution=15, refinement=3).effective_max_iterations() == 22  # 20 + 2
