"""A model's number outside its field's range is brought within it in code (a percentage for a 0-1 share is read
as a share), instead of failing the call; a reply with any other error still fails."""
import json

import pytest
from pydantic import ValidationError

from agent.models.research import ResearchPlan
from agent.models.tenk import TenKEvaluation
from agent.providers.llm.structured import within_bounds


def _fixed(schema, data):
    text = json.dumps(data)
    with pytest.raises(ValidationError) as exc:
        schema.model_validate_json(text)
    return within_bounds(schema, text, exc.value)


def test_a_percentage_for_a_share_and_a_number_past_its_bound():
    assert _fixed(TenKEvaluation, {"quality": 85}).quality == 0.85
    assert _fixed(TenKEvaluation, {"quality": 106}).quality == 1.0
    assert _fixed(TenKEvaluation, {"quality": -2}).quality == 0.0
    plan = _fixed(ResearchPlan, {"reasoning": "r", "tickers": ["QFI"], "confidence": 90, "is_valid": True})
    assert plan is not None and plan.confidence == 0.9


def test_any_other_error_still_fails():
    assert _fixed(TenKEvaluation, {"quality": "high"}) is None
    assert _fixed(TenKEvaluation, {"quality": 90, "answered": "all"}) is None
