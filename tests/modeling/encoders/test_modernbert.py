"""ModernBERT's own parts, beyond the shared family parity (tests/modeling/encoders/test_encoder_families.py):
both config.json layouts transformers writes, the settings it refuses, XLA, bfloat16 and
float16, the int8 copy's cut, where layer-wise decay puts the final norm, and the tokenizer
layouts it refuses."""

import dataclasses
import json

import hf_reference
import numpy as np
import pytest
import tensorflow as tf

from trainer.errors import UserError
from trainer.modeling.encoders.models import modernbert

torch = pytest.importorskip("torch")

# Ten tokens, longer than the tiny config's local window (+-4): local layers see part of them.
IDS = [[1, 5, 9, 12, 7, 30, 41, 8, 17, 2], [1, 14, 2, 0, 0, 0, 0, 0, 0, 0]]
MASK = [[1] * 10, [1, 1, 1] + [0] * 7]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return hf_reference.write_checkpoint("modernbert", tmp_path_factory.mktemp("modernbert"))


@pytest.fixture(scope="module")
def encoder(checkpoint):
    from trainer.modeling.encoders import load_encoder

    return load_encoder(checkpoint, seq_length=32, cache_dir=checkpoint).network


def _tiny_raw():
    return hf_reference.families()["modernbert"].tiny_config().to_dict()


def test_transformers_4_config_keys_read_as_transformers_5_writes_them():
    """ModernBERT-base's config.json (transformers 4.47) names the pattern and thetas;
    transformers 5 writes layer_types and rope_parameters."""
    import transformers

    old = {
        **{key: value for key, value in _tiny_raw().items() if key not in ("layer_types", "rope_parameters")},
        "num_hidden_layers": 4,
        "global_attn_every_n_layers": 3,
        "global_rope_theta": 1000.0,
        "local_rope_theta": 50.0,
    }
    new = transformers.ModernBertConfig(**old).to_dict()
    assert "rope_parameters" in new and "global_rope_theta" not in new
    config = modernbert.read_config(old, "config.json")
    assert config == modernbert.read_config(new, "config.json")
    assert config.layer_types == (modernbert.GLOBAL, modernbert.LOCAL, modernbert.LOCAL, modernbert.GLOBAL)
    assert (config.global_rope_theta, config.local_rope_theta) == (1000.0, 50.0)


def test_the_config_reads_back_from_the_json_an_export_carries():
    """checkpoints.read_hub_savedmodel rebuilds the config with config_class(**json)."""
    config = modernbert.read_config(_tiny_raw(), "config.json")
    assert modernbert.ModernBertConfig(**json.loads(json.dumps(dataclasses.asdict(config)))) == config


@pytest.mark.parametrize(
    "setting,message",
    [
        ({"norm_bias": True}, "norm_bias true"),
        ({"hidden_activation": "silu"}, "hidden_activation silu"),
        (
            {"rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 2.0}}},
            "full_attention rope_type linear",
        ),
        ({"layer_types": ["full_attention", "chunked_attention", "full_attention"]}, "layer_types"),
    ],
)
def test_a_setting_the_network_does_not_compute_is_one_error(setting, message):
    with pytest.raises(UserError, match="^--encoder: config.json describes a modernbert model with " + message):
        modernbert.read_config({**_tiny_raw(), **setting}, "config.json")


def test_xla_computes_what_eager_computes_for_any_batch_length(encoder):
    """One traced function, a batch within the local window and one beyond it."""
    spec = {key: tf.TensorSpec([None, None], tf.int32) for key in hf_reference.features(IDS, MASK)}
    compiled = tf.function(lambda inputs: encoder(inputs)["sequence_output"], jit_compile=True, input_signature=[spec])
    short = hf_reference.features([row[:4] for row in IDS], [row[:4] for row in MASK])
    for features in (short, hf_reference.features(IDS, MASK)):
        assert np.max(np.abs(compiled(features) - encoder(features)["sequence_output"])) <= 1e-5


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_mixed_precision_computes_in_the_reduced_dtype_with_float32_variables(encoder, dtype):
    import tf_keras

    tf_keras.mixed_precision.set_global_policy(f"mixed_{dtype}")
    try:
        network = modernbert.build(encoder.encoder_config)
    finally:
        tf_keras.mixed_precision.set_global_policy("float32")
    network.set_weights(encoder.get_weights())
    outputs = network(hf_reference.features(IDS, MASK))
    assert outputs["sequence_output"].dtype == tf.as_dtype(dtype)
    assert {variable.dtype for variable in network.variables} == {tf.float32}
    difference = np.abs(
        tf.cast(outputs["sequence_output"], tf.float32).numpy()
        - encoder(hf_reference.features(IDS, MASK))["sequence_output"].numpy()
    )
    assert np.max(difference[np.array(MASK, bool)]) < 0.2


def test_the_int8_copys_cut_computes_what_the_whole_encoder_does(encoder):
    """trainer.serving.tflite runs the encoder up to layer 0's output in one model and
    layers_from(..., 1) in the other."""
    import tf_keras

    features = hf_reference.features(IDS, MASK)
    front = tf_keras.Model(encoder.inputs, encoder.get_layer("transformer/layer_0").output)
    back = modernbert.layers_from(encoder, front(features), features["input_mask"], 1)
    whole = encoder(features)
    for name in ("sequence_output", "pooled_output"):
        assert np.max(np.abs(back[name] - whole[name])) <= 1e-6


def test_layer_wise_decay_gives_the_final_norm_the_top_layers_rate(encoder):
    from trainer.modeling.optimization import layer_rate_scales

    scales = {variable.name: scale for variable, scale in layer_rate_scales(encoder.variables, 0.5)}
    final = next(name for name in scales if "final_layer_norm" in name)
    top = next(name for name in scales if name.startswith("transformer/layer_2/mlp_layer_norm"))
    assert scales[final] == scales[top] == 0.5


@pytest.mark.parametrize(
    "template",
    [
        {"type": "RobertaProcessing", "sep": ["[SEP]", 2], "cls": ["[CLS]", 1]},
        {
            "type": "TemplateProcessing",
            "single": [{"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {},
        },
    ],
)
def test_a_tokenizer_that_packs_another_layout_is_refused(checkpoint, tmp_path, template):
    """Ids that would silently differ from Hugging Face's are one error instead."""
    tokenizer = json.load(open(f"{checkpoint}/tokenizer.json", encoding="utf-8"))
    tokenizer["post_processor"] = template
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(tokenizer), encoding="utf-8")
    with pytest.raises(UserError, match=rf"^{path}: .*\[CLS\]"):
        modernbert.FAMILY.preprocessor(str(path), False, 8)
