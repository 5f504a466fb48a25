"""--gradient-checkpointing: transformer blocks recompute their activations in the backward
pass (tf.recompute_grad) and the training step computes exactly what it does without the flag,
dropout included. The memory it saves is measured in bench/gradient_checkpointing.py."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from trainer.modeling.encoders import layers
from trainer.modeling.encoders.models import bert, deberta_v2

SHAPE = dict(vocab_size=40, hidden_size=16, num_layers=2, num_heads=2, intermediate_size=32)
STEPS = 2  # the second step starts from the dropout generators' states the first left


@pytest.fixture(autouse=True)
def dropout_generators():
    """The trainer's dropout (stages.set_up_runtime): tf.random.Generator variables."""
    enabled = tf_keras.backend.experimental.is_tf_random_generator_enabled()
    tf_keras.backend.experimental.enable_tf_random_generator()
    yield
    if not enabled:
        tf_keras.backend.experimental.disable_tf_random_generator()


def _train_steps(build, config, recompute: bool) -> list:
    """(loss, gradients) of STEPS tf.function steps of a freshly seeded network."""
    tf_keras.utils.set_random_seed(7)
    network = build(config)
    if recompute:
        assert layers.recompute_blocks(network) == config.num_layers
    ids = np.random.RandomState(0).randint(3, config.vocab_size, (3, 9)).astype(np.int32)
    mask = np.ones_like(ids)
    mask[1, 6:] = 0
    features = dict(input_word_ids=ids, input_mask=mask, input_type_ids=np.zeros_like(ids))
    weights = tf.range(config.hidden_size, dtype=tf.float32)  # a loss with non-zero gradients

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            output = network(features, training=True)
            loss = tf.reduce_sum(output["sequence_output"] * weights) + tf.reduce_sum(output["pooled_output"])
        return loss, [tf.convert_to_tensor(g) for g in tape.gradient(loss, network.trainable_variables)]

    return [step() for _ in range(STEPS)]


def _assert_same(plain: list, recomputed: list):
    for (loss, gradients), (loss_r, gradients_r) in zip(plain, recomputed):
        np.testing.assert_allclose(loss_r.numpy(), loss.numpy(), rtol=1e-6)
        assert len(gradients_r) == len(gradients)
        for gradient, gradient_r in zip(gradients, gradients_r):
            np.testing.assert_allclose(gradient_r.numpy(), gradient.numpy(), rtol=1e-5, atol=1e-5)


def test_recomputed_blocks_give_the_same_loss_and_gradients_without_dropout():
    config = layers.EncoderConfig(**SHAPE, dropout_rate=0.0, attention_dropout_rate=0.0)
    _assert_same(_train_steps(bert.build, config, False), _train_steps(bert.build, config, True))


def test_the_recomputation_drops_the_units_the_forward_pass_dropped():
    """tf.recompute_grad replays no random op: without resetting each block's dropout
    generators the recomputed masks differ and the gradients are of another network. MPNet's
    relative bias is a differentiable input of every block."""
    config = layers.EncoderConfig(**SHAPE, dropout_rate=0.3, attention_dropout_rate=0.3, relative_attention_buckets=4)
    plain = _train_steps(bert.build, config, False)
    recomputed = _train_steps(bert.build, config, True)
    assert all(np.isfinite(g.numpy()).all() for _, gradients in recomputed for g in gradients)
    _assert_same(plain, recomputed)


def test_deberta_blocks_recompute_with_their_relative_position_rows():
    config = deberta_v2.DebertaConfig(
        **SHAPE,
        max_position_embeddings=16,
        position_buckets=4,
        max_relative_positions=16,
        dropout_rate=0.3,
        attention_dropout_rate=0.3,
    )
    _assert_same(_train_steps(deberta_v2.build, config, False), _train_steps(deberta_v2.build, config, True))


def test_an_encoder_without_such_blocks_is_one_error():
    """The hub backend (and ModernBERT, whose blocks have their own layout) cannot recompute:
    the run stops before training instead of silently keeping every activation."""
    from trainer.errors import UserError
    from trainer.modeling.encoders import Encoder
    from trainer.training import stages

    hub_encoder = Encoder(
        preprocessor=None,
        network=None,
        backend="hub",
        source="handle",
        default_pooling="cls",
        vocab_size=0,
        hidden_size=16,
    )
    with pytest.raises(UserError, match="--gradient-checkpointing: a TF-Hub SavedModel"):
        stages._recompute_blocks(hub_encoder)


def test_a_native_family_without_the_capability_is_one_error_naming_those_with_it():
    """Which families recompute is their records' gradient_checkpointing field: ModernBERT's
    pre-LN blocks do not; the error names every family that does, from the registry."""
    import types

    from trainer.errors import UserError
    from trainer.modeling.encoders import Encoder, families
    from trainer.modeling.encoders.models import modernbert
    from trainer.training import stages

    config = modernbert.ModernBertConfig(**SHAPE, layer_types=("full_attention",) * 2)
    encoder = Encoder(
        preprocessor=None,
        network=types.SimpleNamespace(encoder_config=config),
        backend="native",
        source="dir",
        default_pooling="cls",
        vocab_size=40,
        hidden_size=16,
        architecture="ModernBERT (`modernbert`)",
    )
    with pytest.raises(UserError, match="--gradient-checkpointing: ModernBERT") as error:
        stages._recompute_blocks(encoder)
    named = " " + str(error.value).split("it applies to the native ")[1]
    for family in families.BY_MODEL_TYPE.values():
        assert (f" {family.name} (" in named) == family.gradient_checkpointing, family.name


def test_a_native_family_with_the_capability_recomputes_every_block():
    from trainer.modeling.encoders import Encoder
    from trainer.training import stages

    network = bert.build(layers.EncoderConfig(**SHAPE, family="electra"))
    encoder = Encoder(
        preprocessor=None,
        network=network,
        backend="native",
        source="dir",
        default_pooling="cls",
        vocab_size=40,
        hidden_size=16,
    )
    stages._recompute_blocks(encoder)
    blocks = [layer for layer in network.submodules if isinstance(layer, layers.TransformerEncoderBlock)]
    assert len(blocks) == SHAPE["num_layers"] and all(block.recompute for block in blocks)
