"""Quality evaluation on real public data: FinanceBench retrieval and answers, transcript facts, calibration.
Plain functions; `finagent eval ...` (ops/cli/eval.py) and the tests call them."""
