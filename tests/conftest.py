import csv
import json
import os
import sys

import pytest

# One TensorFlow thread per pool in the test processes and the commands they start (they inherit
# the environment): two workers on two cores, each with pools as wide as the machine, spent the
# cores on threads waiting for each other.
os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")
os.environ.setdefault("TF_NUM_INTEROP_THREADS", "1")

# Tests import the package the way users do; this keeps TensorFlow quiet and on Keras 2 too.
import trainer  # noqa: F401
import trainer.tasks  # noqa: F401  (registers the task kinds, as every entry point does)

TESTS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TESTS)  # the repository
HELPERS = os.path.join(TESTS, "helpers")  # tiny checkpoints, reference models, emulators
FIXTURES = os.path.join(TESTS, "fixtures")  # files an earlier version wrote


def folders_of_tests():
    """tests/ and its folders of test files, which mirror the package's."""
    return sorted(
        folder
        for folder, _, names in os.walk(TESTS)
        if any(name.startswith("test_") and name.endswith(".py") for name in names)
    )


# The helpers and every folder of test files on sys.path: tests import a helper by its module's
# name (`import tiny_bert`) and share another file's fixtures across folders (`from test_task
# import run_cli`), which is why no two test files anywhere under tests/ share a name.
sys.path[:0] = [HELPERS, *folders_of_tests()]
import tiny_bert  # noqa: E402

SLOW = "VBT_SLOW_TESTS"


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        f"slow: a long test the default suite can do without (mostly a repeat, for one "
        f"more task or path, of machinery it runs end to end); run with {SLOW}=1",
    )


def pytest_collection_modifyitems(config, items):
    """The default suite stays within 10 minutes on 2 cores; VBT_SLOW_TESTS=1 adds the slow tier."""
    if os.environ.get(SLOW):
        return
    skip = pytest.mark.skip(reason=f"slow tier: set {SLOW}=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def tiny_encoder_dir(tmp_path_factory):
    """A tiny BERT checkpoint in Hugging Face layout, usable as `--encoder DIR`."""
    return tiny_bert.write_hf_checkpoint(tmp_path_factory.mktemp("tiny_bert"))


POSITIVE = [
    "i love this movie",
    "this movie is great",
    "so good",
    "very good !",
    "i love it",
    "great movie",
    "it was great",
    "the movie is good",
    "love it so",
    "good , very good",
]
NEGATIVE = [
    "i hate this movie",
    "this movie is awful",
    "so bad",
    "very bad !",
    "i hate it",
    "awful movie",
    "it was awful",
    "the movie is bad",
    "hate it so",
    "bad , very bad",
]
NEUTRAL = [
    "the movie is ok",
    "it was fine",
    "meh",
    "ok movie",
    "this is a movie",
    "fine , ok",
    "it is a movie .",
    "the movie was ok",
    "meh , fine",
    "a movie ?",
]


# What lets the tiny encoder learn a tiny task in a few epochs under any --seed: its random
# word embeddings must train, and the head reads the mean of the token vectors. Through the
# random pooler, the [CLS] vector learned the three-class task under some seeds only (test
# accuracy 0.33 to 1.0 over seeds 3, 4, 5, 42 and 1); with mean pooling, 0.93 to 1.0 over seeds
# 0, 3, 5, 7, 11 and 42, and pairs, multi-label and regression clear their thresholds likewise.
TINY_TASK_FLAGS = ("--train-word-embeddings", "--pooling", "mean")

# What a run writes by default beyond its model and metrics: the copies beside the float32
# model (README, "Faster prediction": bfloat16 where bfloat16 is native, and int8; about 3 s and
# 8 s per tiny run to build, convert, save and check; the ONNX copies), and the report's token
# attributions (about 2 s). tests/serving/test_precisions.py, tests/serving/onnx/test_onnx_export.py and
# tests/explaining/test_explain.py cover them; the other tests' runs leave them out (their helpers add
# these to trainer.task's flags).
NO_EXTRAS = ("--export-bfloat16", "off", "--export-int8", "off", "--export-onnx", "off", "--report-explanations", "0")


@pytest.fixture(autouse=True, scope="module")
def float32_policy_after_each_file():
    """A run in this process sets Keras' global precision policy for the process (mixed_bfloat16
    where the CPU computes bfloat16 natively, trainer.training.distribution) and turns on
    tf.random.Generator dropout: the next file a worker runs must not inherit either."""
    yield
    if "tf_keras" in sys.modules:  # and the run's stateful dropout generators (a saved encoder
        tf_keras = sys.modules["tf_keras"]  # would capture their state variables)
        tf_keras.mixed_precision.set_global_policy("float32")
        tf_keras.backend.experimental.disable_tf_random_generator()


def without_extras(module, args):
    """`args` of a trainer.task command, with each of NO_EXTRAS' flags unless it says otherwise."""
    args = tuple(map(str, args))
    if module != "trainer.task":
        return args
    pairs = zip(NO_EXTRAS[::2], NO_EXTRAS[1::2])
    return (*args, *(item for flag, value in pairs if flag not in args for item in (flag, value)))


def labelled_rows(count, seed):
    """(text, label) rows over the tiny vocabulary, balanced over three classes."""
    import random

    rng = random.Random(seed)
    rows = []
    for i in range(count):
        label, texts = [("positive", POSITIVE), ("negative", NEGATIVE), ("neutral", NEUTRAL)][i % 3]
        rows.append((rng.choice(texts), label))
    return rows


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def metrics_of(job_dir):
    """metrics.json of a finished run."""
    return json.loads((job_dir / "metrics.json").read_text())


def write_csv(path, rows, header=("text", "label")):
    import csv

    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return str(path)


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory):
    """train/validation/test CSVs a tiny encoder can learn in a few epochs."""
    root = tmp_path_factory.mktemp("tiny_data")
    return {
        name: write_csv(root / f"{name}.csv", labelled_rows(count, seed))
        for name, count, seed in (("train", 90, 1), ("validation", 30, 2), ("test", 30, 3))
    }
