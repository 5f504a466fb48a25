"""The exported model computes in float32 whatever precision it was trained in, and gives the
predictions the trainer's own evaluation gave; float16 training (loss scaling) works on CPU.

Below the CLI: the trainer refuses float16 on a CPU, so these build the classifier under each
dtype policy directly, as the trainer does after choosing one.
"""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from conftest import labelled_rows

from trainer.data import input_pipeline
from trainer.modeling import heads
from trainer.modeling.encoders import load_encoder
from trainer.serving import export

LABELS = ["negative", "neutral", "positive"]
SEQ_LENGTH = 16
MATMUL_OPS = ("MatMul", "BatchMatMulV2", "Einsum")


@pytest.fixture
def policy(request):
    tf_keras.mixed_precision.set_global_policy(request.param)
    yield request.param
    tf_keras.mixed_precision.set_global_policy("float32")


def split(encoder, rows):
    texts = [text for text, _ in rows]
    return texts, input_pipeline.tokenize(texts, encoder.preprocessor, [LABELS.index(label) for _, label in rows])


def trained_classifier(encoder_dir, epochs=8):
    """A tiny classifier fitted under the global policy, and its validation texts and split."""
    encoder = load_encoder(encoder_dir, seq_length=SEQ_LENGTH)
    model = heads.build_classifier(encoder.network, len(LABELS), "cls", dropout=0.0)
    head = model.get_layer("logits")  # its only randomly initialised weights: fixed, for a repeatable test
    head.set_weights([np.random.default_rng(0).normal(0, 0.02, w.shape) for w in head.get_weights()])
    model.compile(
        optimizer=tf_keras.optimizers.Adam(1e-2), loss=tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    batching = input_pipeline.Batching(16, input_pipeline.padded_lengths(SEQ_LENGTH), bucket=False)
    _, train = split(encoder, labelled_rows(90, 1))
    history = model.fit(
        input_pipeline.training_dataset(train, batching, seed=1, first_epoch=0, epochs=epochs),
        epochs=epochs,
        steps_per_epoch=batching.steps(train),
        verbose=0,
    )
    texts, validation = split(encoder, labelled_rows(150, 2))
    return encoder, model, history, texts, input_pipeline.evaluation_dataset(validation, batching)


def in_training_probabilities(model, dataset):
    """What the trainer's evaluation computes from: the model's logits, softmaxed in float64."""
    logits = model.predict(dataset, verbose=0)["logits"].astype(np.float64)
    exp = np.exp(logits - logits.max(axis=1, keepdims=True))
    return exp / exp.sum(axis=1, keepdims=True)


def export_and_serve(encoder, model, texts, model_dir, float32=True):
    with export.computing_in_float32(model, enabled=float32):
        export.export(export.ServingModule(encoder.preprocessor, model, LABELS, SEQ_LENGTH), str(model_dir))
    serve = export.load(str(model_dir))
    return serve, {k: v.numpy() for k, v in serve(text=tf.constant(texts)).items()}


def matmul_dtypes(serve):
    graph_def = serve.graph.as_graph_def()
    nodes = list(graph_def.node) + [n for f in graph_def.library.function for n in f.node_def]
    return {tf.dtypes.as_dtype(n.attr["T"].type).name for n in nodes if n.op in MATMUL_OPS}


@pytest.mark.slow  # a run and a server of its own (CI's slow lines, on 2.21 and 2.20)
@pytest.mark.parametrize("policy", ["float32"], indirect=True)
def test_a_float32_model_serves_the_probabilities_its_evaluation_computed(tiny_encoder_dir, policy, tmp_path):
    encoder, model, _, texts, validation = trained_classifier(tiny_encoder_dir)
    _, served = export_and_serve(encoder, model, texts, tmp_path / "model")
    np.testing.assert_allclose(served["probabilities"], in_training_probabilities(model, validation), atol=1e-5)


# Slow tier (about a minute where the CPU emulates bfloat16); CI runs it on both stacks
# (.ci/run's SLOW_TPU_STACK_TESTS).
@pytest.mark.slow
@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"], indirect=True)
def test_a_reduced_precision_model_serves_in_float32_with_the_labels_its_evaluation_gave(
    tiny_encoder_dir, policy, tmp_path
):
    encoder, model, _, texts, validation = trained_classifier(tiny_encoder_dir)
    probabilities = in_training_probabilities(model, validation)
    top_two = np.sort(probabilities, axis=1)[:, -2:]
    # bfloat16 keeps 8 significant bits and float16 11, so a near-tie may fall either way (how it
    # falls depends on the CPU's kernels: AMX, AVX512-BF16 or emulated); a clear decision may not.
    decided = top_two[:, 1] - top_two[:, 0] > {"mixed_bfloat16": 0.1, "mixed_float16": 0.02}[policy]
    serve, served = export_and_serve(encoder, model, texts, tmp_path / "model")
    assert matmul_dtypes(serve) == {"float32"}
    assert served["probabilities"].dtype == np.float32
    # Enough clear decisions for the comparison to mean something: eight epochs teach the tiny
    # model the tiny task, but one class apart from the other two is enough here (a run on a
    # loaded machine in CI once decided only the positive third of the rows under float16).
    assert decided.mean() >= 0.25
    np.testing.assert_array_equal(served["label_index"][decided], probabilities.argmax(axis=1)[decided])
    np.testing.assert_array_equal(served["label"].astype(str), np.array(LABELS)[served["label_index"]])


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["mixed_bfloat16"], indirect=True)
def test_the_training_precision_is_kept_on_request_and_the_trained_model_keeps_it(tiny_encoder_dir, policy, tmp_path):
    encoder, model, _, texts, _ = trained_classifier(tiny_encoder_dir, epochs=1)
    float32_serve, _ = export_and_serve(encoder, model, texts[:4], tmp_path / "float32")
    kept_serve, _ = export_and_serve(encoder, model, texts[:4], tmp_path / "kept", float32=False)
    assert matmul_dtypes(float32_serve) == {"float32"}
    assert "bfloat16" in matmul_dtypes(kept_serve)
    assert {layer.compute_dtype for layer in model.submodules if isinstance(layer, tf_keras.layers.Dense)} >= {
        "bfloat16"
    }


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["mixed_float16"], indirect=True)
def test_float16_training_scales_the_loss_and_resumes_from_a_checkpoint(tiny_encoder_dir, policy, tmp_path):
    encoder, model, history, _, _ = trained_classifier(tiny_encoder_dir, epochs=2)
    assert isinstance(model.optimizer, tf_keras.mixed_precision.LossScaleOptimizer)
    assert np.isfinite(history.history["loss"]).all()
    # What the trainer's resume checkpoint holds: model, optimizer (with its loss scale), epoch.
    tf.train.Checkpoint(model=model, optimizer=model.optimizer).write(str(tmp_path / "resume"))

    resumed_encoder = load_encoder(tiny_encoder_dir, seq_length=SEQ_LENGTH)
    resumed = heads.build_classifier(resumed_encoder.network, len(LABELS), "cls", dropout=0.0)
    resumed.compile(
        optimizer=tf_keras.optimizers.Adam(1e-2), loss=tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    resumed.optimizer.build(resumed.trainable_variables)
    tf.train.Checkpoint(model=resumed, optimizer=resumed.optimizer).read(str(tmp_path / "resume")).assert_consumed()
    assert float(resumed.optimizer.loss_scale) == float(model.optimizer.loss_scale)
    assert int(resumed.optimizer.iterations) == int(model.optimizer.iterations)
    for before, after in zip(model.weights, resumed.weights):
        np.testing.assert_array_equal(before.numpy(), after.numpy())
    _, train = split(resumed_encoder, labelled_rows(90, 1))
    batching = input_pipeline.Batching(16, input_pipeline.padded_lengths(SEQ_LENGTH), bucket=False)
    more = resumed.fit(
        input_pipeline.training_dataset(train, batching, seed=1, first_epoch=2, epochs=3),
        epochs=1,
        steps_per_epoch=batching.steps(train),
        verbose=0,
    )
    assert np.isfinite(more.history["loss"]).all()
