"""One layer owns the retries of a remote call: a client that retried marks its final error, and the task around the
call does not retry a marked error, so one LLM request makes at most 1 + max_tool_retries HTTP attempts in all."""
from __future__ import annotations

import pytest
from celery.exceptions import SoftTimeLimitExceeded

from agent.infra.client_retries import ClientRetried, mark_retried, retried_by_client, task_may_retry
from agent.providers.llm.attempts import sdk_call
from agent.providers.llm.openai_provider import OpenAIProvider
from agent.settings import Settings
from agent.time_limits import SDK_RETRY_WAIT_S, llm_attempts, role_call_s

RETRYABLE = {"network", "rate_limit", "system", "unknown"}


def test_the_mark_is_found_on_the_error_or_anything_that_caused_it():
    inner = ConnectionResetError("reset")
    mark_retried(inner, "llm", 3)
    try:
        try:
            raise inner
        except ConnectionResetError as exc:
            raise TimeoutError("soft time limit of 90 s exceeded") from exc
    except TimeoutError as outer:
        assert retried_by_client(outer) == ClientRetried(client="llm", attempts=3)
    assert retried_by_client(ValueError("never sent")) is None and retried_by_client(None) is None


def test_a_cause_cycle_ends_the_search():
    a, b = RuntimeError("a"), RuntimeError("b")
    a.__cause__, b.__cause__ = b, a
    assert retried_by_client(a) is None


def test_the_task_retries_only_a_transient_error_nobody_retried_yet():
    spent = ClientRetried(client="llm", attempts=3)
    assert task_may_retry("system", None, retries=0, limit=2, retryable=RETRYABLE)
    assert not task_may_retry("system", spent, retries=0, limit=2, retryable=RETRYABLE)  # the SDK's attempts were all
    assert not task_may_retry("network", None, retries=2, limit=2, retryable=RETRYABLE)  # the task's own budget
    assert not task_may_retry("parameter", None, retries=0, limit=2, retryable=RETRYABLE)


def test_the_note_says_how_many_attempts_were_made():
    assert ClientRetried(client="llm", attempts=3).note() == " (llm client: 3 HTTP attempts, not retried again)"
    assert ClientRetried(client="llm", attempts=0).note() == " (llm client: its retries, not retried again)"


@pytest.mark.parametrize("error", [ConnectionError("down"), SoftTimeLimitExceeded()])
def test_an_sdk_call_marks_whatever_ends_it(error):
    """The SDK's final error, and a soft time limit that broke off its attempts (the limit's budget covered them)."""

    def call() -> None:
        raise error

    with pytest.raises(type(error)) as info:
        sdk_call(call)
    assert retried_by_client(info.value) == ClientRetried(client="llm", attempts=0)  # nothing sent through the client
    assert sdk_call(lambda x: x + 1, 1) == 2


@pytest.mark.parametrize("retries", [0, 1, 2])
def test_the_time_limits_budget_the_attempts_the_sdk_makes(retries):
    settings = Settings(_env_file=None, max_tool_retries=retries, llm_provider="openai", llm_base_url="http://127.0.0.1:9/v1")
    assert OpenAIProvider(settings).client.max_retries + 1 == llm_attempts(settings) == 1 + retries
    one_request = llm_attempts(settings) * settings.llm_timeout_s + retries * SDK_RETRY_WAIT_S
    assert role_call_s(settings) >= one_request
