"""Under XLA (`jit_compile`), every new input shape is a new compilation. Over two epochs the
second compiles nothing, and with static shapes on there is one shape per step function
whatever the split sizes: training drops the last partial batch, evaluation pads it (or, for a
split that fills whole batches, needs no padding) to the same static shape.

Compilations are counted from XLA's module dump, in a fresh process (XLA reads XLA_FLAGS once).
"""

import json
import os
import subprocess
import sys

import pytest
from conftest import TESTS

SCRIPT = '''
import json, os, random, sys
import numpy as np
import trainer
import tensorflow as tf
import tf_keras
from conftest import NEGATIVE, NEUTRAL, POSITIVE
from trainer.data import input_pipeline
from trainer.modeling import heads
from trainer.modeling.encoders import load_encoder
from trainer.modeling import split_outputs

encoder_dir, dump_dir, static = sys.argv[1], sys.argv[2], sys.argv[3] == "static"
rng = random.Random(0)

def rows(count):
    """Texts of 1 to 3 repeated sentences: token counts spread over several length buckets."""
    picked = [(rng.choice(texts), i % 3) for i, texts in
              ((i, (NEGATIVE, NEUTRAL, POSITIVE)[i % 3]) for i in range(count))]
    return [" ".join([t] * rng.randint(1, 3)) for t, _ in picked], [label for _, label in picked]

encoder = load_encoder(encoder_dir, seq_length=32)
lengths = input_pipeline.padded_lengths(32)
def split(count):
    texts, labels = rows(count)
    return input_pipeline.tokenize(texts, encoder.preprocessor, labels)

train, validation, test = split(101), split(40), split(37)  # 40 = 5 whole evaluation batches of 8
train_batching = input_pipeline.Batching(8, lengths, bucket=not static, drop_remainder=static)
eval_batching = input_pipeline.Batching(8, lengths, bucket=not static)
model = heads.build_classifier(encoder.network, 3, "cls", dropout=0.0)
model.compile(optimizer=tf_keras.optimizers.Adam(1e-3), jit_compile=True,
              loss=tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))

def compiled():
    return len({name.split(".")[0] for name in os.listdir(dump_dir) if name.startswith("module_")})

counts = []
class Count(tf_keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        for name in (validation, test):  # as the trainer evaluates: every epoch
            split_outputs.predict_logits(model, input_pipeline.evaluation_dataset(name, eval_batching, static))
        counts.append(compiled())

model.fit(input_pipeline.training_dataset(train, train_batching, seed=1, first_epoch=0, epochs=2),
          epochs=2, steps_per_epoch=train_batching.steps(train), callbacks=[Count()], verbose=0)
print("COUNTS " + json.dumps(counts))
'''


def compilations_per_epoch(encoder_dir, dump_dir, mode):
    environ = {
        **os.environ,
        "XLA_FLAGS": f"--xla_dump_to={dump_dir}",
        "PYTHONPATH": os.pathsep.join([TESTS, os.environ.get("PYTHONPATH", "")]),
    }
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, encoder_dir, str(dump_dir), mode],
        capture_output=True,
        text=True,
        timeout=600,
        env=environ,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(line for line in result.stdout.splitlines() if line.startswith("COUNTS "))
    return json.loads(line.split(" ", 1)[1])


@pytest.mark.slow
def test_the_second_epoch_compiles_nothing_new_with_length_buckets(tiny_encoder_dir, tmp_path):
    first, second = compilations_per_epoch(tiny_encoder_dir, tmp_path, "bucket")
    assert first > 2, "several buckets: several shapes"
    assert second == first


@pytest.mark.slow
def test_static_shapes_compile_one_training_and_one_evaluation_step_for_any_split_size(tiny_encoder_dir, tmp_path):
    assert compilations_per_epoch(tiny_encoder_dir, tmp_path, "static") == [2, 2]
