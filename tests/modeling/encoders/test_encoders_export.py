"""`python -m trainer.export_encoder` writes TF-Hub-format SavedModels that work elsewhere.

"Elsewhere" is a fresh process: nothing of this package imported, the source checkpoint gone.
"""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tf_keras
import tiny_bert
from conftest import ROOT as REPO
from conftest import without_extras

from trainer.modeling.encoders import load_encoder
from trainer.modeling.encoders.hub import HubPreprocessor

SENTENCES = ["i love this movie !", "it was not good , it was bad .", "meh"]


def run_python(*args):
    result = subprocess.run(
        [sys.executable, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.fixture(scope="module")
def checkpoint_dir(tmp_path_factory):
    return tiny_bert.write_hf_checkpoint(tmp_path_factory.mktemp("tiny_export_source"))


@pytest.fixture(scope="module")
def exported_dir(checkpoint_dir, tmp_path_factory):
    output = str(tmp_path_factory.mktemp("exported"))
    run_python(
        "-m", "trainer.export_encoder", "--encoder", checkpoint_dir, "--output-dir", output, "--max-seq-length", "16"
    )
    return output


HUB_CONSUMER = """
import os, sys
os.environ["TF_USE_LEGACY_KERAS"] = "1"  # hub.KerasLayer is a Keras 2 layer
import numpy as np, tensorflow as tf, tensorflow_hub as hub, tensorflow_text  # noqa: F401
exported, sentences, result = sys.argv[1], sys.argv[2:-1], sys.argv[-1]
strings = tf.constant(sentences)
preprocess = hub.KerasLayer(os.path.join(exported, "preprocessor"))
encoder = hub.KerasLayer(os.path.join(exported, "encoder"), trainable=True)
inputs = preprocess(strings)
outputs = encoder(inputs)
# TF-Hub's documented way to pack at another length.
loaded = hub.load(os.path.join(exported, "preprocessor"))
pack = hub.KerasLayer(loaded.bert_pack_inputs, arguments=dict(seq_length=6))
short = pack([loaded.tokenize(strings)])
np.savez(result, word_ids=inputs["input_word_ids"], pooled=outputs["pooled_output"],
         sequence=outputs["sequence_output"], short_word_ids=short["input_word_ids"],
         layers=len(outputs["encoder_outputs"]))
"""


@pytest.mark.slow  # run by hand (docs/testing.md), not in CI
def test_hub_keraslayer_loads_the_export_in_a_fresh_process(exported_dir, checkpoint_dir, tmp_path):
    moved = str(tmp_path / "moved")
    shutil.copytree(exported_dir, moved)  # nothing may point back at the export's first home
    script, result = tmp_path / "consumer.py", str(tmp_path / "result.npz")
    script.write_text(HUB_CONSUMER)
    run_python(str(script), moved, *SENTENCES, result)
    fresh = np.load(result)

    native = load_encoder(checkpoint_dir, seq_length=16)
    inputs = native.preprocessor(tf.constant(SENTENCES))
    outputs = native.network(inputs)
    np.testing.assert_array_equal(fresh["word_ids"], inputs["input_word_ids"])
    np.testing.assert_allclose(fresh["pooled"], outputs["pooled_output"], atol=1e-5)
    np.testing.assert_allclose(fresh["sequence"], outputs["sequence_output"], atol=1e-5)
    assert fresh["layers"] == tiny_bert.CONFIG["num_hidden_layers"]
    np.testing.assert_array_equal(
        fresh["short_word_ids"],
        native.preprocessor.bert_pack_inputs([native.preprocessor.tokenize(tf.constant(SENTENCES))], seq_length=6)[
            "input_word_ids"
        ],
    )


def test_the_export_directory_is_itself_an_encoder_argument(exported_dir, checkpoint_dir):
    exported = load_encoder(exported_dir, seq_length=16)
    native = load_encoder(checkpoint_dir, seq_length=16)
    inputs = native.preprocessor(tf.constant(SENTENCES))
    np.testing.assert_allclose(
        exported.network(inputs)["sequence_output"], native.network(inputs)["sequence_output"], atol=1e-6
    )


def test_the_hub_preprocessor_wrapper_packs_like_the_native_preprocessor(exported_dir, checkpoint_dir):
    wrapped = HubPreprocessor(os.path.join(exported_dir, "preprocessor"), seq_length=12)
    native = load_encoder(checkpoint_dir, seq_length=12).preprocessor
    strings = tf.constant(SENTENCES)
    tokens, reversed_tokens = wrapped.tokenize(strings), wrapped.tokenize(strings[::-1])
    for segments in ([tokens], [tokens, reversed_tokens]):
        for seq_length in (None, 7):
            packed = wrapped.bert_pack_inputs(segments, seq_length=seq_length)
            expected = native.bert_pack_inputs(segments, seq_length=seq_length)
            for key in expected:
                np.testing.assert_array_equal(packed[key], expected[key])
    for key, ids in native(strings).items():
        np.testing.assert_array_equal(wrapped(strings)[key], ids)


SERVING_CONSUMER = """
import json, sys
import tensorflow as tf, tensorflow_text  # noqa: F401  (registers the tokenizer's ops)
model = tf.saved_model.load(sys.argv[1])
logits = model.signatures["serving_default"](tf.constant(sys.argv[2:]))["logits"]
print(json.dumps(logits.numpy().tolist()))
"""


@pytest.mark.slow  # a fresh process loading an export (CI's slow line)
def test_a_model_taking_raw_strings_reloads_with_only_tensorflow_and_tensorflow_text(checkpoint_dir, tmp_path):
    """The vocabulary travels as a SavedModel asset, not as a Python value in a closure."""
    source = shutil.copytree(checkpoint_dir, tmp_path / "source")
    encoder = load_encoder(str(source), seq_length=16)
    strings = tf_keras.Input(shape=(), dtype=tf.string)
    pooled = encoder.network(encoder.preprocessor(strings))["pooled_output"]
    model = tf_keras.Model(strings, tf_keras.layers.Dense(2, dtype="float32")(pooled))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def serve(texts):
        return {"logits": model(texts)}

    # Saving the Keras model itself works too but traces every layer (9 s instead of 2 s).
    exported = tf.train.Checkpoint(preprocessor=encoder.preprocessor, variables=model.variables)
    exported.serve = serve
    tf.saved_model.save(exported, str(tmp_path / "model"), signatures={"serving_default": serve})
    shutil.rmtree(source)
    script = tmp_path / "serve.py"
    script.write_text(SERVING_CONSUMER)
    logits = json.loads(run_python(str(script), str(tmp_path / "model"), *SENTENCES))
    np.testing.assert_allclose(logits, model(tf.constant(SENTENCES)), atol=1e-5)


# --------------------------------------------------------------------------- a fine-tuned job dir


def train_cli(*args):
    env = {**os.environ, "VBT_CACHE_DIR": os.environ.get("VBT_CACHE_DIR", "/tmp/vbt-test-cache")}
    result = subprocess.run(
        [sys.executable, "-m", "trainer.task", *without_extras("trainer.task", args)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def tiny_run(encoder, tiny_data, job_dir):
    return [
        "--encoder",
        encoder,
        "--training-file",
        tiny_data["train"],
        "--validation-file",
        tiny_data["validation"],
        "--job-dir",
        job_dir,
        "--epochs",
        "1",
        "--batch-size",
        "16",
        "--learning-rate",
        "1e-2",
        "--max-seq-length",
        "16",
        "--mixed-precision",
        "off",
    ]


def encoder_weights(directory):
    from trainer.modeling.encoders import checkpoints

    return checkpoints.read_hub_savedmodel(directory).weights


@pytest.fixture(scope="module")
def finetuned_job(checkpoint_dir, tiny_data, tmp_path_factory):
    job_dir = tmp_path_factory.mktemp("finetune") / "job"
    train_cli(*tiny_run(checkpoint_dir, tiny_data, job_dir))
    out = run_python("-m", "trainer.export_encoder", "--encoder", str(job_dir))
    return job_dir, out


@pytest.mark.slow
def test_a_job_dir_exports_its_fine_tuned_encoder_with_no_other_flag(finetuned_job, checkpoint_dir):
    job_dir, out = finetuned_job
    exported = job_dir / "encoder_export"
    assert f"use it with --encoder {exported}" in out
    assert (exported / "encoder" / "saved_model.pb").exists() and (
        exported / "preprocessor" / "saved_model.pb"
    ).exists()
    fine_tuned, written = encoder_weights(str(job_dir / "model")), encoder_weights(str(exported / "encoder"))
    assert set(written) <= set(fine_tuned) and len(written) > 10
    for name, value in written.items():
        np.testing.assert_array_equal(value.reshape(fine_tuned[name].shape), fine_tuned[name])
    pretrained = load_encoder(checkpoint_dir, seq_length=16).network
    kernel = next(v for v in pretrained.weights if "layer_0/intermediate/kernel" in v.name)
    assert not np.allclose(kernel.numpy(), written["transformer/layer_0/intermediate/kernel"].reshape(kernel.shape))


@pytest.mark.slow
def test_the_exported_fine_tuned_encoder_starts_a_new_run(finetuned_job, tiny_data, tmp_path):
    job_dir, _ = finetuned_job
    train_cli(*tiny_run(str(job_dir / "encoder_export"), tiny_data, tmp_path / "second"), "--dry-run")
    assert (tmp_path / "second" / "model" / "saved_model.pb").exists()


def test_without_a_job_dir_the_output_dir_is_required(checkpoint_dir):
    result = subprocess.run(
        [sys.executable, "-m", "trainer.export_encoder", "--encoder", checkpoint_dir],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and "--output-dir: required" in result.stderr
