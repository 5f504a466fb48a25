"""DeBERTa-v3's own parts, beyond the shared family parity (tests/modeling/encoders/test_encoder_families.py):
the log-bucketed relative positions at the published size, the short-batch window of the
position table, XLA and bfloat16, the padding rows of the int8 copy's float16 front, and the
settings it refuses."""

import dataclasses

import hf_reference
import numpy as np
import pytest
import tensorflow as tf

from trainer.errors import UserError
from trainer.modeling.encoders.models import deberta_v2

torch = pytest.importorskip("torch")

PUBLISHED = dict(
    vocab_size=128100,
    hidden_size=768,
    num_layers=12,
    num_heads=12,
    intermediate_size=3072,
    max_position_embeddings=512,
    position_buckets=256,
    max_relative_positions=512,
)  # microsoft/deberta-v3-base


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return hf_reference.write_checkpoint("deberta_v2", tmp_path_factory.mktemp("deberta_v2"))


@pytest.fixture(scope="module")
def encoder(checkpoint):
    from trainer.modeling.encoders import load_encoder

    return load_encoder(checkpoint, seq_length=32, cache_dir=checkpoint).network


# Six tokens, fewer than the tiny config's 8 buckets a side: the window path; padding included.
SHORT_IDS = [[1, 5, 9, 12, 7, 2], [1, 14, 2, 0, 0, 0]]
SHORT_MASK = [[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]]


@pytest.mark.parametrize("length", [512, 4096])
def test_relative_position_rows_are_pytorchs_log_buckets_at_the_published_size(length):
    from transformers.models.deberta_v2 import modeling_deberta_v2 as reference

    config = deberta_v2.DebertaConfig(**{**PUBLISHED, "max_position_embeddings": length})
    distance = torch.arange(1 - length, length)
    buckets = reference.make_log_bucket_position(distance, 256, 512).long()
    expected = torch.clamp(buckets + 256, 0, 511).numpy()
    assert np.array_equal(deberta_v2.relative_position_rows(config), expected)


def test_a_batch_shorter_than_the_bucket_span_equals_the_reference(checkpoint, encoder):
    """Fewer tokens than buckets: only the table rows they reach enter the products."""
    reference = hf_reference.hidden_states(checkpoint, SHORT_IDS, SHORT_MASK)
    ours = encoder(hf_reference.features(SHORT_IDS, SHORT_MASK))
    assert hf_reference.max_difference(ours["sequence_output"], reference["sequence_output"], SHORT_MASK) <= 1e-4


def test_xla_computes_what_eager_computes_for_any_batch_length(encoder):
    """One traced function, lengths below and above the bucket span (the table's window)."""
    spec = {key: tf.TensorSpec([None, None], tf.int32) for key in hf_reference.features(SHORT_IDS, SHORT_MASK)}
    compiled = tf.function(lambda inputs: encoder(inputs)["sequence_output"], jit_compile=True, input_signature=[spec])
    long_ids, long_mask = [[1] + [9] * 30 + [2]] * 2, [[1] * 32, [1] * 20 + [0] * 12]
    for features in (hf_reference.features(SHORT_IDS, SHORT_MASK), hf_reference.features(long_ids, long_mask)):
        assert np.max(np.abs(compiled(features) - encoder(features)["sequence_output"])) <= 1e-5


def test_mixed_bfloat16_computes_in_bfloat16_with_float32_variables(encoder):
    import tf_keras

    tf_keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        network = deberta_v2.build(encoder.encoder_config)
    finally:
        tf_keras.mixed_precision.set_global_policy("float32")
    network.set_weights(encoder.get_weights())
    outputs = network(hf_reference.features(SHORT_IDS, SHORT_MASK))
    assert outputs["sequence_output"].dtype == tf.bfloat16
    assert {variable.dtype for variable in network.variables} == {tf.float32}
    difference = np.abs(
        tf.cast(outputs["sequence_output"], tf.float32).numpy()
        - encoder(hf_reference.features(SHORT_IDS, SHORT_MASK))["sequence_output"].numpy()
    )
    assert np.max(difference[np.array(SHORT_MASK, bool)]) < 0.2


def test_padding_rows_stay_finite_where_layer_norm_epsilon_reads_as_zero(encoder):
    """The int8 copy's float16 front reads eps 1e-7 as 0 and [PAD]'s embedding is all zeros:
    the padding rows' 0/0 must not reach the real rows through the masked keys."""
    config = dataclasses.replace(encoder.encoder_config, layer_norm_eps=0.0)
    network = deberta_v2.build(config, dtype="float32")
    network.set_weights(encoder.get_weights())
    outputs = network(hf_reference.features(SHORT_IDS, SHORT_MASK))["sequence_output"].numpy()
    assert np.isfinite(outputs[np.array(SHORT_MASK, bool)]).all()


@pytest.mark.parametrize(
    "setting,message",
    [
        (
            {"conv_kernel_size": 3},
            "sets conv_kernel_size 3; the native deberta-v2 encoder computes DeBERTa-v3's conv_kernel_size 0",
        ),
        ({"position_biased_input": True}, "sets position_biased_input true"),
        ({"pos_att_type": "c2p"}, 'sets pos_att_type "c2p"'),
    ],
)
def test_a_setting_the_network_does_not_compute_is_one_error(setting, message):
    raw = {**hf_reference.families()["deberta_v2"].tiny_config().to_dict(), **setting}
    with pytest.raises(UserError, match="^--encoder: config.json " + message):
        deberta_v2.read_config(raw, "config.json")


def test_a_lower_casing_tokenizer_config_is_refused(checkpoint, tmp_path):
    import shutil

    shutil.copy(f"{checkpoint}/spm.model", tmp_path / "spm.model")
    (tmp_path / "tokenizer_config.json").write_text('{"do_lower_case": true}')
    with pytest.raises(UserError, match="sets do_lower_case true"):
        deberta_v2.FAMILY.preprocessor(str(tmp_path / "spm.model"), False, 8)


def test_a_saved_encoder_gives_back_every_weight_for_the_fine_tuned_reload(encoder, tmp_path):
    """What `--encoder JOB_DIR` reads from model/: no position table is required of DeBERTa."""
    from trainer.modeling.encoders import assign_weights, checkpoints, hub

    hub.save_encoder_savedmodel(encoder, str(tmp_path), None, None)
    network = deberta_v2.build(encoder.encoder_config, dtype="float32")
    assign_weights(network, checkpoints.savedmodel_weights(str(tmp_path)), str(tmp_path))
    features = hf_reference.features(SHORT_IDS, SHORT_MASK)
    assert np.array_equal(network(features)["sequence_output"], encoder(features)["sequence_output"])
