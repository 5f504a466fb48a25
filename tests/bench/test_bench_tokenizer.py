"""bench/tokenizer_speed.py times the three tokenizers on the texts it is given and counts the
texts whose ids differ from TF-Text's BertTokenizer (for the package's preprocessor, only those
BertTokenizer's NFKC case folding changes: the package lower-cases as Hugging Face does)."""

import json
import os
import sys

import pytest
from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "bench"))
import tokenizer_speed  # noqa: E402

TEXTS = [
    "Héllo Wörld! Café crème brûlée",
    "Don't stop—it's 5:30 p.m., right?!",
    "I love it 😀🎉",
    "Tokyo 東京 and 北京",
    "xqzvbnm floccinaucinihilipilification unbelievably",
    "ﬁne… ＡＢＣ™",
    "@user #hashtag https://t.co/x9 no\u00a0break",
]


@pytest.mark.slow  # it times three tokenizers (CI's slow line)
def test_reports_every_tokenizer_and_no_differing_ids(tmp_path):
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    out = tmp_path / "results.json"
    results = tokenizer_speed.main(
        ["--texts", str(texts), "--rows", "50", "--batch-size", "16", "--rounds", "1", "--json", str(out)]
    )
    assert results["rows"] == 50 and results["distinct_texts"] == len(TEXTS)
    assert results["differing_texts"] == 1  # "ﬁne… ＡＢＣ™", which NFKC changes
    assert len(results["rows_per_second"]) == 3
    assert all(rate > 0 for rate in results["rows_per_second"].values())
    assert json.loads(out.read_text()) == results
