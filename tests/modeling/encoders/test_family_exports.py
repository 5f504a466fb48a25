"""`python -m trainer.export_encoder` of every native encoder family: its encoder/ + preprocessor/
SavedModels read back, as `--encoder DIR`, as the same encoder (the same ids from the same texts,
the same hidden states). Slow tier, beside tests/modeling/encoders/test_family_runs.py, run by hand on
TensorFlow 2.21 (docs/testing.md); a file of its own so that the two share the slow line's workers."""

import hf_reference
import pytest
from test_predict import run_cli

pytest.importorskip("torch")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    return {
        family: hf_reference.write_checkpoint(family, tmp_path_factory.mktemp(family))
        for family in hf_reference.families()
    }


@pytest.mark.parametrize("family", sorted(hf_reference.families()))
def test_an_exported_encoder_reads_back_as_the_same_encoder(checkpoints, family, tmp_path):
    import numpy as np
    import tensorflow as tf

    from trainer.modeling.encoders import load_encoder

    result = run_cli(
        "trainer.export_encoder",
        "--encoder",
        checkpoints[family],
        "--output-dir",
        tmp_path / "export",
        "--max-seq-length",
        "32",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    original, exported = (
        load_encoder(str(path), seq_length=32, cache_dir=str(tmp_path / "cache"))
        for path in (checkpoints[family], tmp_path / "export")
    )
    texts = tf.constant(["i love this movie !", "so bad"])
    features = original.preprocessor(texts)
    assert all(np.array_equal(features[key], exported.preprocessor(texts)[key]) for key in features)
    np.testing.assert_allclose(
        exported.network(features)["sequence_output"], original.network(features)["sequence_output"], atol=1e-6
    )
