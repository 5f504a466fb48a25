"""bench/encoder_parity.py builds each family's batches with its own special ids and compares
the package's encoder with transformers' forward on them (here at a tiny config; the published
configs' results are committed under bench/results/)."""

import os
import sys

import pytest
from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "bench"))
import encoder_parity  # noqa: E402
import published_encoders  # noqa: E402

pytest.importorskip("torch")


def test_a_pair_is_cls_a_sep_b_sep_with_types_padded_with_the_familys_pad_id():
    deberta = published_encoders.PUBLISHED["deberta-v3-base"]
    pairs = encoder_parity.batches(deberta, 128100, 16)["pairs"]
    ids, types, mask = (pairs[k][2].tolist() for k in ("input_word_ids", "input_type_ids", "input_mask"))
    assert [ids[0], ids[4], ids[9]] == [1, 2, 2] and ids[10:] == [0] * 6  # 3 and 4 tokens
    assert not {1, 2, 0} & set(ids[1:4] + ids[5:9])
    assert types == [0] * 5 + [1] * 5 + [0] * 6
    assert mask == [1] * 10 + [0] * 6


def test_roberta_pairs_have_two_separators_and_no_types():
    roberta = published_encoders.PUBLISHED["roberta-base"]
    pairs = encoder_parity.batches(roberta, 50265, 16)["pairs"]
    ids = pairs["input_word_ids"][2].tolist()
    assert [ids[0], ids[4], ids[5], ids[10]] == [0, 2, 2, 2] and ids[11:] == [1] * 5
    assert not pairs["input_type_ids"].any()


# tests/modeling/encoders/test_encoder_families.py checks the same in the default suite; CI runs it on 2.21
@pytest.mark.slow
def test_a_family_at_a_tiny_config_is_within_the_tolerance_on_both_batches(tmp_path):
    import reference_roberta

    directory = published_encoders.checkpoint("roberta-base", str(tmp_path), reference_roberta.tiny_config())
    result = encoder_parity.check("roberta-base", directory, 32, str(tmp_path / "cache"))
    assert set(result["batches"]) == {"padded", "pairs"}
    assert set(result["batches"]["pairs"]) == {"sequence_output", "pooled_output"}
    assert result["passed"] and 0 < result["max_difference"] <= encoder_parity.TOLERANCE
