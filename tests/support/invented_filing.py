"""An invented annual report as page texts (the layout `finagent ingest pages` reads: documents.jsonl and
pages/{doc_name}.jsonl.gz), shaped like a PDF text extraction of a 10-K: a cover page, a page of MD&A prose and the three
primary statements. Every name and figure is made up."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

COMPANY = "Quillfeather Instruments"
DOC = "QUILLFEATHER_2023_10K"

PAGES = [
    f"UNITED STATES SECURITIES AND EXCHANGE COMMISSION\nFORM 10-K\nAnnual report for the fiscal year ended December 31, 2023\n"
    f"{COMPANY}, Inc.\nCommission file number 001-99999",
    "Item 7. Management's Discussion and Analysis\nNet sales grew in 2023 on higher volumes of precision gauges and "
    "a favourable mix. Operating income rose as freight costs eased and pricing held. We expect capital spending to "
    "stay near current levels as the new plant ramps up.",
    f"Table of Contents\n{COMPANY}, Inc.\nConsolidated Statements of Operations\n(in millions, except per share data)\n"
    "Years Ended December 31, 2023 2022 2021\n"
    "Net sales $ 12,345 $ 11,002 $ 9,870\nCost of goods sold 7,001 6,540 5,932\nGross profit 5,344 4,462 3,938\n"
    "Selling, general and administrative\nexpenses 2,100 1,987 1,802\nRestructuring charges (see Note 5) 45 — 12\n"
    "Operating income 3,199 2,475 2,124\nInterest expense (210) (198) (187)\nIncome before income taxes 2,989 2,277 1,937\n"
    "Provision for income taxes 628 478 407\nNet income $ 2,361 $ 1,799 $ 1,530\n"
    "Earnings per share:\nBasic $ 4.72 $ 3.60 $ 3.06\nDiluted $ 4.68 $ 3.57 $ 3.03\n"
    "Weighted-average shares outstanding:\nBasic 500 500 500\nDiluted 504 504 505\n"
    "See accompanying notes to the consolidated financial statements.\n52",
    f"Table of Contents\n{COMPANY}, Inc.\nConsolidated Balance Sheets\n(in millions)\nDecember 31, 2023 2022\nAssets\n"
    "Current assets:\nCash and cash equivalents $ 1,250 $ 980\nAccounts receivable, net 1,640 1,502\n"
    "Inventories 2,210 2,090\nPrepaid expenses and other current assets 310 295\nTotal current assets 5,410 4,867\n"
    "Property, plant and equipment, net 6,020 5,610\nGoodwill 1,880 1,880\nTotal assets $ 13,310 $ 12,357\n"
    "Liabilities and Shareholders' Equity\nCurrent liabilities:\nAccounts payable $ 1,120 $ 1,034\n"
    "Accrued liabilities 870 812\nCurrent portion of long-term debt 250 250\nTotal current liabilities 2,240 2,096\n"
    "Long-term debt 3,400 3,650\nTotal liabilities 5,640 5,746\nTotal shareholders' equity 7,670 6,611\n"
    "Total liabilities and shareholders' equity $ 13,310 $ 12,357\n"
    "See accompanying notes to the consolidated financial statements.\n53",
    f"Table of Contents\n{COMPANY}, Inc.\nConsolidated Statements of Cash Flows\n(in millions)\n"
    "Years Ended December 31, 2023 2022 2021\nCash flows from operating activities:\nNet income $ 2,361 $ 1,799 $ 1,530\n"
    "Depreciation and amortization 640 602 575\nChanges in operating assets and liabilities:\nInventories (120) (95) (60)\n"
    "Accounts payable 86 40 31\nNet cash provided by operating activities 2,967 2,346 2,076\n"
    "Cash flows from investing activities:\nPurchases of property, plant and equipment (1,050) (980) (910)\n"
    "Net cash used in investing activities (1,050) (980) (910)\nCash flows from financing activities:\n"
    "Dividends paid (600) (550) (500)\nRepurchases of common stock (400) (300) (200)\nRepayments of debt (250) (250) (250)\n"
    "Net cash used in financing activities (1,250) (1,100) (950)\nNet increase in cash 667 266 216\n54",
]


def write_corpus(root: Path) -> Path:
    """The corpus under `root` (created); returns `root`."""
    (root / "pages").mkdir(parents=True, exist_ok=True)
    (root / "documents.jsonl").write_text(json.dumps({"doc_name": DOC, "company": COMPANY, "doc_type": "10k",
                                                      "doc_period": 2023}) + "\n")
    with gzip.open(root / "pages" / f"{DOC}.jsonl.gz", "wt", encoding="utf-8") as fh:
        for i, text in enumerate(PAGES):
            fh.write(json.dumps({"doc_name": DOC, "page": i, "text": text}) + "\n")
    return root
