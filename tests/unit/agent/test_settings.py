"""Settings: FINAGENT_ environment, the seed tables, secret masking, phase limits."""
from __future__ import annotations

import json
import os

import pytest
from pydantic import ValidationError

from agent.settings import DEFAULT_MODES, AnswerMode, PhaseLimits, Settings


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
    clean_env.setenv("FINAGENT_KEYWORD_WEIGHT", "0.4")  # the two weights must sum to 1
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
    assert s.phases.execution == 7 and s.phases.planning == 3
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
    assert PhaseLimits().effective_max_iterations() == 10  # 3+3+3 = 9, +10% (at least 1)
    assert PhaseLimits().effective_max_iterations(4) == 4  # explicit wins
    assert PhaseLimits(planning=2, execution=15, refinement=3).effective_max_iterations() == 22  # 20 + 2


# ---------- validation: invalid configuration fails at load time, naming the setting and its env var ----------

def load(**overrides) -> Settings:
    return Settings(_env_file=None, **overrides)


def modes_with(mode: str, **fields) -> dict:
    table = {m.value: c.model_dump() for m, c in DEFAULT_MODES.items()}
    table[mode].update(fields)
    return table


def invalid(**overrides) -> str:
    with pytest.raises(ValidationError) as info:
        load(**overrides)
    return str(info.value)


def test_valid_defaults_load(clean_env):
    s = load()
    assert s.semantic_weight + s.keyword_weight == pytest.approx(1)
    assert 0 <= s.chunk_overlap < s.chunk_size
    assert list(s.modes) == list(AnswerMode)
    assert load(semantic_weight=1, keyword_weight=0, chunk_overlap=0).chunk_overlap == 0  # boundaries are valid
    assert load(semantic_weight=0.1, keyword_weight=0.9 + 5e-7).keyword_weight == pytest.approx(0.9)  # within 1e-6
    assert load(modes=modes_with("standard", max_iterations=2, max_tokens=2000, confidence_threshold=0.7)).mode("standard").max_iterations == 2


@pytest.mark.parametrize("semantic, keyword", [(0.6, 0.3), (0.7, 0.4), (0.5, 0.5 + 1e-5), (0, 0)])
def test_weights_must_sum_to_one(clean_env, semantic, keyword):
    text = invalid(semantic_weight=semantic, keyword_weight=keyword)
    assert "must sum to 1" in text
    assert "FINAGENT_SEMANTIC_WEIGHT" in text and "FINAGENT_KEYWORD_WEIGHT" in text


@pytest.mark.parametrize("semantic, keyword, bad", [(1.2, -0.2, "semantic_weight"), (-0.1, 1.1, "keyword_weight")])
def test_weights_must_lie_in_zero_one(clean_env, semantic, keyword, bad):
    text = invalid(semantic_weight=semantic, keyword_weight=keyword)
    assert bad in text and f"FINAGENT_{bad.upper()}" in text


def test_weight_error_from_the_environment(clean_env):
    clean_env.setenv("FINAGENT_SEMANTIC_WEIGHT", "0.6")
    with pytest.raises(ValidationError, match="FINAGENT_SEMANTIC_WEIGHT"):
        Settings()


@pytest.mark.parametrize("size, overlap", [(1000, 1000), (500, 800)])
def test_chunk_overlap_must_be_below_chunk_size(clean_env, size, overlap):
    text = invalid(chunk_size=size, chunk_overlap=overlap)
    assert "chunk_overlap" in text and "FINAGENT_CHUNK_OVERLAP" in text and "FINAGENT_CHUNK_SIZE" in text


@pytest.mark.parametrize("overrides, bad", [({"chunk_size": 0, "chunk_overlap": 0}, "chunk_size"),
                                            ({"chunk_size": -5, "chunk_overlap": 0}, "chunk_size"),
                                            ({"chunk_overlap": -1}, "chunk_overlap")])
def test_chunk_sizes_must_be_positive(clean_env, overrides, bad):
    text = invalid(**overrides)
    assert bad in text and f"FINAGENT_{bad.upper()}" in text


def test_every_answer_mode_must_be_present(clean_env):
    table = modes_with("direct")
    del table["deep_search"]
    text = invalid(modes=table)
    assert "modes" in text and "FINAGENT_MODES" in text and "missing: deep_search" in text


@pytest.mark.parametrize("field, value", [("max_iterations", 0), ("max_tokens", 0), ("confidence_threshold", 0),
                                          ("confidence_threshold", -0.5), ("confidence_threshold", 1.01)])
def test_mode_config_bounds(clean_env, field, value):
    text = invalid(modes=modes_with("direct", **{field: value}))
    assert f"modes.direct.{field}" in text and f"FINAGENT_MODES__DIRECT__{field.upper()}" in text


def test_confidence_threshold_of_one_is_valid(clean_env):
    assert load(modes=modes_with("deep_search", confidence_threshold=1.0)).mode("deep_search").confidence_threshold == 1.0


@pytest.mark.parametrize("mode, field, value, breaks", [
    ("standard", "max_iterations", 1, "standard"),  # below direct's 2
    ("detailed", "max_tokens", 5000, "detailed"),  # below standard's 6000
    ("deep_search", "confidence_threshold", 0.85, "deep_search"),  # below detailed's 0.90
    ("direct", "max_tokens", 7000, "standard"),  # raising an earlier mode breaks the order at the next one
])
def test_modes_must_not_decrease(clean_env, mode, field, value, breaks):
    text = invalid(modes=modes_with(mode, **{field: value}))
    assert f"must not decrease {field}" in text and f"mode {breaks} breaks the order" in text
    assert f"modes.{breaks}.{field}" in text and f"FINAGENT_MODES__{breaks.upper()}__{field.upper()}" in text


@pytest.mark.parametrize("phase", ["planning", "execution", "refinement"])
def test_phase_limits_must_be_at_least_one(clean_env, phase):
    text = invalid(phases={phase: 0})
    assert f"phases.{phase}" in text and f"FINAGENT_PHASES__{phase.upper()}" in text
    with pytest.raises(ValidationError):
        PhaseLimits(**{phase: 0})


def test_phase_limit_error_from_the_environment(clean_env):
    clean_env.setenv("FINAGENT_PHASES__REFINEMENT", "0")
    with pytest.raises(ValidationError, match="FINAGENT_PHASES__REFINEMENT"):
        Settings()


def test_validation_errors_do_not_echo_secrets(clean_env):
    with pytest.raises(ValidationError) as info:
        load(semantic_weight=0.5, tavily_api_key="tvly-very-secret", redis_url="redis://:redis-pass@cache/0")
    for text in (str(info.value), json.dumps(info.value.errors(), default=str)):
        assert "tvly-very-secret" not in text and "redis-pass" not in text
