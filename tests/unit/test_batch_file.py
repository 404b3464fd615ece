"""Reading an overnight batch file: bad lines are reported with their line number, the rest still run."""
from __future__ import annotations

from ops.batch import read_batch


def test_bad_lines_are_named_and_good_lines_kept(tmp_path):
    f = tmp_path / "q.txt"
    f.write_text("What was NVDA's revenue last quarter?\n"
                 "\n"
                 "# a comment\n"
                 '{"question": "Compare AAPL and MSFT revenue", "mode": "detailed", "tickers": ["AAPL", "MSFT"]}\n'
                 '{"question": "broken\n'
                 "ok\n"
                 '{"question": "What is Amazon\'s inventory turnover?", "mode": "turbo"}\n'
                 '["not", "an", "object"]\n')
    lines = read_batch(f, mode="standard")
    assert [x.line for x in lines] == [1, 4, 5, 6, 7, 8]
    good = [x for x in lines if x.request]
    assert [x.line for x in good] == [1, 4]
    assert good[0].request.mode.value == "standard" and good[0].request.batch
    assert good[1].request.mode.value == "detailed" and good[1].request.tickers == ["AAPL", "MSFT"]
    errors = {x.line: x.error for x in lines if x.error}
    assert errors[5].startswith("invalid JSON")
    assert "question" in errors[6] and "at least 3" in errors[6]
    assert "mode" in errors[7]
    assert errors[8] == "expected a JSON object"


def test_same_file_same_keys_edited_file_new_keys(tmp_path):
    f = tmp_path / "q.txt"
    f.write_text("What was NVDA's revenue last quarter?\nHow did AAPL services grow?\n")
    keys = [x.request.idempotency_key for x in read_batch(f)]
    assert keys == [x.request.idempotency_key for x in read_batch(f)] and len(set(keys)) == 2
    f.write_text("What was NVDA's revenue last quarter?\nHow did MSFT cloud grow?\n")
    assert not set(keys) & {x.request.idempotency_key for x in read_batch(f)}
