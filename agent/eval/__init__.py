"""Quality evaluation on real public data: FinanceBench retrieval and answers, transcript facts, calibration.
Plain functions; `finagent eval ...` (ops/eval_cli.py) and the tests call them."""
