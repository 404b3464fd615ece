"""Reading an overnight batch: bad lines are named with their line number, and each line is keyed by its own
content, so an edited file changes only the keys of the lines that changed."""
from __future__ import annotations

from agent.batches import content_key, parse_lines, read_file
from agent.models.job import JobRequest


def test_bad_lines_are_named_and_good_lines_kept(tmp_path):
    f = tmp_path / "q.txt"
    f.write_text("What was the revenue of Example Co last quarter?\n"
                 "\n"
                 "# a comment\n"
                 '{"question": "Compare two companies\' operating margins", "mode": "detailed", "tickers": ["AAA", "BBB"]}\n'
                 '{"question": "broken\n'
                 "ok\n"
                 '{"question": "What is the inventory turnover?", "mode": "turbo"}\n'
                 '["not", "an", "object"]\n')
    lines = read_file(f, mode="standard")
    assert [x.line for x in lines] == [1, 4, 5, 6, 7, 8]
    good = [x for x in lines if x.request]
    assert [x.line for x in good] == [1, 4]
    assert good[0].request.mode.value == "standard" and good[0].request.batch
    assert good[1].request.mode.value == "detailed" and good[1].request.tickers == ["AAA", "BBB"]
    errors = {x.line: x.error for x in lines if x.error}
    assert errors[5].startswith("invalid JSON")
    assert "question" in errors[6] and "at least 3" in errors[6]
    assert "mode" in errors[7] and lines[4].question == "What is the inventory turnover?"
    assert errors[8] == "expected a question or a JSON object"


def test_the_key_is_the_questions_content_not_its_position():
    a = parse_lines(["How did gross margin change?", "What drove free cash flow?"])
    moved = parse_lines(["# a new comment on top", "What drove free cash flow?", "How did gross margin change?"])
    assert {x.key for x in a} == {x.key for x in moved} and len({x.key for x in a}) == 2
    edited = parse_lines(["How did gross margin change?", "What drove free cash flow in the last year?"])
    assert a[0].key == edited[0].key and a[1].key != edited[1].key


def test_whitespace_and_ticker_order_do_not_change_the_key_but_options_do():
    base = JobRequest(question="How did gross margin change?", tickers=["AAA", "BBB"])
    assert content_key(base) == content_key(JobRequest(question="  How did  gross margin\tchange? ", tickers=["bbb", "aaa"]))
    assert content_key(base) == content_key(base.model_copy(update={"idempotency_key": "x", "batch": True}))
    assert content_key(base) != content_key(JobRequest(question="How did gross margin change?", tickers=["AAA", "BBB"], mode="detailed"))
    assert content_key(base) != content_key(base.model_copy(update={"question": "How did net margin change?"}))


def test_json_list_items_may_be_strings_or_objects_and_caller_keys_are_ignored():
    lines = parse_lines(["What drove revenue growth?", {"question": "What were the risk factors?", "idempotency_key": "mine",
                                                         "batch": False}, {"mode": "direct"}])
    assert [x.error is None for x in lines] == [True, True, False]
    assert lines[1].request.batch and lines[1].request.idempotency_key is None
    assert "question" in lines[2].error
