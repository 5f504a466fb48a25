"""The runtime without TensorFlow (issue 66): trainer.predict and trainer.serve run a model dir's
ONNX copy where TensorFlow cannot be imported and answer as the TensorFlow runtime answers;
--runtime auto takes the fastest copy this Python can run and says why; what needs TensorFlow
(--runtime tensorflow, training, explanations) is one line naming what to install.

"Without TensorFlow" is a fresh process whose imports of the TensorFlow stack fail as a missing
package's do (tests/helpers/without_tensorflow.py); a predict through one takes about a second. The
model is the tiny classifier exported here, its float32 ONNX copy written by the export's own
code (trainer/serving/onnx/copies.py), no training.
"""

import json
import logging
import os
import signal
import subprocess
import sys
import time

import httpx
import numpy as np
import pytest
from conftest import HELPERS, read_csv

from trainer.errors import UserError

NAMES = ["negative", "neutral", "positive"]
TEXTS = [
    "i love this movie !",
    "so bad",
    "",
    "meh , it was fine",
    "the movie is good " * 6,
    "great movie",
    "i hate it",
    "a movie ?",
]
INSTALL = "install the TensorFlow stack with `bash scripts/install.sh`"


@pytest.fixture(scope="module")
def model_dir(tiny_encoder_dir, tmp_path_factory):
    """A model dir as a run leaves it: the tiny classifier's SavedModel (calibrated: temperature
    1.3), its float32 ONNX copy in onnx/, and precisions.json's entry of the copy's check."""
    from trainer import task_registry
    from trainer.modeling import heads
    from trainer.modeling.encoders import load_encoder
    from trainer.serving import export, variants
    from trainer.serving.onnx import copies

    def build():
        encoder = load_encoder(tiny_encoder_dir, seq_length=16)
        return encoder.preprocessor, heads.build_classifier(encoder.network, len(NAMES), "mean", dropout=0.0)

    preprocessor, classifier = build()
    logits = classifier.get_layer("logits")  # far from uniform, so the labels say something
    rng = np.random.default_rng(0)
    logits.set_weights([rng.normal(0, 3, w.shape).astype(np.float32) for w in logits.get_weights()])
    path = str(tmp_path_factory.mktemp("onnx_runtime") / "model")
    export.export(export.ServingModule(preprocessor, classifier, NAMES, 16, temperature=1.3), path)
    reference = export.load_module(path)
    (write, _), _ = copies.float32_copy(
        build, classifier.variables, reference, task_registry.by_name(None), NAMES, 16, False
    )
    write(variants.variant_dir(path, "onnx"))
    variants.record(path, "onnx", {"written": True, "passed": True, "speedup": 1.5})
    return path


@pytest.fixture(scope="module")
def texts_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("onnx_input") / "in.csv"
    lines = ["text,label", *(f'"{text}",x' for text in TEXTS)]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def without_tensorflow(module, *args, timeout=120):
    """`python -m module args` in a fresh process where TensorFlow cannot be imported."""
    return subprocess.run(
        [sys.executable, os.path.join(HELPERS, "without_tensorflow.py"), "-m", module, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def predicted_in_process(model_dir, texts_file, output, *flags):
    from test_task import run_in_process

    result = run_in_process(
        "--model-dir", model_dir, "--input", texts_file, "--output", output, *flags, module="trainer.predict"
    )
    assert result.returncode == 0, result.stderr
    return read_csv(output)


def assert_same_rows(got, expected):
    """Same columns, labels and notes; probabilities within 1e-4 (the issue's bound)."""
    assert len(got) == len(expected) and list(got[0]) == list(expected[0])
    for row, other in zip(got, expected):
        for column, value in other.items():
            if column.startswith("probability_") and value:
                assert float(row[column]) == pytest.approx(float(value), abs=1e-4), column
            else:
                assert row[column] == value, column


def test_predict_without_tensorflow_writes_what_the_tensorflow_runtime_writes(model_dir, texts_file, tmp_path):
    expected = predicted_in_process(model_dir, texts_file, tmp_path / "tf.csv", "--runtime", "tensorflow")
    result = without_tensorflow(
        "trainer.predict", "--model-dir", model_dir, "--input", texts_file, "--output", tmp_path / "onnx.csv"
    )
    assert result.returncode == 0, result.stderr
    assert f"loaded the onnx model ({model_dir}/onnx)" in result.stdout
    assert_same_rows(read_csv(tmp_path / "onnx.csv"), expected)


def test_an_onnx_copy_on_its_own_is_a_model_dir(model_dir, texts_file, tmp_path):
    """Each copy is a folder that can be copied alone and served."""
    expected = predicted_in_process(model_dir, texts_file, tmp_path / "tf.csv", "--runtime", "tensorflow")
    alone = f"{model_dir}/onnx"
    result = without_tensorflow(
        "trainer.predict", "--model-dir", alone, "--input", texts_file, "--output", tmp_path / "alone.csv"
    )
    assert result.returncode == 0, result.stderr
    assert_same_rows(read_csv(tmp_path / "alone.csv"), expected)


# A model of its own each (windows: 12-26 s, CI's slow line; pairs: 20-26 s, by hand); the default
# suite's runtime test is test_predict_without_tensorflow_writes_what_the_tensorflow_runtime_writes.
@pytest.mark.slow
@pytest.mark.parametrize("kind", ["windows", "pairs"])
def test_the_runtime_predicts_what_the_savedmodel_predicts_in_runs_of_rows_cut_to_their_longest(
    tiny_encoder_dir, tmp_path, kind
):
    """Rows of one to three windows (--long-texts windows), or pairs, more than one run of
    ROWS_PER_RUN: each run is cut to its longest row, in whole windows past the first."""
    from test_onnx_export import LENGTH, copied, tiny_export, windows

    from trainer.inference import loaded_model
    from trainer.serving.onnx import runtime

    settings = windows("mean") if kind == "windows" else {"pair": True}
    module, build, task, names, pair = tiny_export(
        tiny_encoder_dir, str(tmp_path / "cache"), "classification", **settings
    )
    path = copied(tmp_path, module, build, task, names, pair)[0]
    texts = [" ".join(["good movie"] * n) for n in range(1, 3 * LENGTH, 2)]
    pairs = texts[::-1] if pair else None
    assert len(texts) > runtime.ROWS_PER_RUN
    expected = loaded_model.predict_outputs(module, texts, 64, pairs)
    got = loaded_model.predict_outputs(runtime.OnnxModule(str(path)), texts, 64, pairs)
    np.testing.assert_allclose(got["probabilities"], expected["probabilities"], atol=1e-4, rtol=0)
    assert got["label"].tolist() == expected["label"].tolist()


def test_the_server_answers_the_same_json_on_both_runtimes(model_dir):
    from trainer.serving.server import ModelService

    answers = {}
    for runtime in ("tensorflow", "onnx"):
        service = ModelService(model_dir, max_batch_size=4, max_wait=0.01, runtime=runtime)
        answers[runtime] = service.load()(TEXTS)[0]
    assert [a.keys() for a in answers["onnx"]] == [a.keys() for a in answers["tensorflow"]]
    for onnx, tf in zip(answers["onnx"], answers["tensorflow"]):
        assert onnx["label"] == tf["label"] and onnx.get("note") == tf.get("note")
        if tf["probabilities"] is not None:
            assert onnx["probabilities"] == pytest.approx(tf["probabilities"], abs=1e-4)


def test_the_server_refuses_explanations_where_tensorflow_is_missing(model_dir, monkeypatch):
    from trainer import installed
    from trainer.serving.server import ModelService

    monkeypatch.setattr(installed, "tensorflow", lambda: False)
    service = ModelService(model_dir, max_batch_size=4, max_wait=0.01, runtime="onnx")
    service.load()
    assert service.explain_refused.startswith('{"explain": true} needs TensorFlow, which this Python')
    assert service.explain_refused.endswith(INSTALL)


@pytest.mark.parametrize(
    "module, args, what",
    [
        ("trainer.predict", ["--runtime", "tensorflow"], "--runtime tensorflow"),
        ("trainer.explain", [], "trainer.explain (integrated gradients through the SavedModel)"),
    ],
)
def test_what_needs_tensorflow_is_one_line_naming_what_to_install(model_dir, texts_file, tmp_path, module, args, what):
    result = without_tensorflow(
        module, "--model-dir", model_dir, "--input", texts_file, "--output", tmp_path / "out.csv", *args
    )
    assert result.returncode == 2 and not (tmp_path / "out.csv").exists()
    assert result.stderr.splitlines() == [
        f"error: {what} needs TensorFlow, which this Python does not "
        f"have (an ONNX runtime environment: `bash scripts/install.sh "
        f"onnx`); {INSTALL}"
    ]


def test_training_without_tensorflow_is_one_line_naming_what_to_install(texts_file, tmp_path):
    result = without_tensorflow("trainer.task", "--training-file", texts_file, "--job-dir", tmp_path / "job")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"error: this command needs TensorFlow, which this Python "
        f"does not have (an ONNX runtime environment: `bash "
        f"scripts/install.sh onnx`); {INSTALL}"
    ]


def test_a_package_the_onnx_runtime_leaves_out_is_one_line_naming_it(capsys):
    """trainer.evaluate scores with scikit-learn, which `bash scripts/install.sh onnx` leaves out."""
    from trainer import cli

    def main(argv):
        raise ModuleNotFoundError("No module named 'sklearn'", name="sklearn")

    assert cli.run(main, []) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: this command needs scikit-learn, which this Python does not have (an ONNX runtime "
        f"environment: `bash scripts/install.sh onnx`); {INSTALL}"
    ]


def test_bfloat16_with_the_onnx_runtime_is_one_line(model_dir, texts_file, tmp_path):
    result = without_tensorflow(
        "trainer.predict",
        "--model-dir",
        model_dir,
        "--input",
        texts_file,
        "--output",
        tmp_path / "out.csv",
        "--runtime",
        "onnx",
        "--precision",
        "bfloat16",
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "error: --precision bfloat16: the ONNX copies compute in float32 "
        "or int8; a bfloat16 copy runs with --runtime tensorflow"
    ]


def test_evaluate_scores_the_copy_as_it_scores_the_savedmodel(model_dir, tmp_path):
    """At the export's decisions (its temperature, 1.3, enters the loss), which the copy's
    onnx.json records and the runtime reads as a SavedModel's variables."""
    from test_task import run_in_process

    labelled = tmp_path / "labelled.csv"
    labelled.write_text("text,label\n" + "".join(f'"{text}",{NAMES[i % 3]}\n' for i, text in enumerate(TEXTS)))
    scored = {}
    for runtime in ("tensorflow", "onnx"):
        output = tmp_path / f"{runtime}.json"
        result = run_in_process(
            "--model-dir",
            model_dir,
            "--input",
            labelled,
            "--runtime",
            runtime,
            "--output",
            output,
            module="trainer.evaluate",
        )
        assert result.returncode == 0, result.stderr
        scored[runtime] = json.loads(output.read_text())
    assert scored["onnx"]["decisions"] == pytest.approx(scored["tensorflow"]["decisions"])
    assert scored["onnx"]["decisions"]["temperature"] == pytest.approx(1.3)
    for name, value in scored["tensorflow"]["metrics"].items():  # the loss within 1e-4, counts equal
        assert scored["onnx"]["metrics"][name] == (
            pytest.approx(value, abs=1e-4) if isinstance(value, float) else value
        ), name


def test_a_copy_from_another_version_is_one_line_saying_to_export_it_again(model_dir, tmp_path):
    import shutil

    copy = shutil.copytree(f"{model_dir}/onnx", tmp_path / "onnx")
    facts = json.loads((copy / "onnx.json").read_text())
    del facts["decisions"]
    (copy / "onnx.json").write_text(json.dumps(facts))
    result = without_tensorflow(
        "trainer.predict", "--model-dir", copy, "--input", "in.csv", "--output", tmp_path / "out.csv"
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"error: {copy}/onnx.json: no 'decisions': the copy was written by another version of the "
        f"trainer; export it again with this one (python -m trainer.export_quantized)"
    ]


def checked(**speedups):
    return {copy: {"passed": True, "speedup": speedup} for copy, speedup in speedups.items()}


def test_auto_takes_the_onnx_copy_where_tensorflow_is_missing_and_says_why():
    from trainer.serving import variants

    assert variants.choose(
        "auto", ("float32", "int8", "onnx"), False, "m", checked(int8=2.0, onnx=0.9), runtime="auto", tensorflow=False
    ) == ("onnx", "the float32, int8 models need TensorFlow, which this Python does not have")


@pytest.mark.parametrize(
    "speedups, expected",
    [
        (dict(onnx=1.05), "float32"),
        (dict(onnx=1.2), "onnx"),
        (dict(int8=2.6, onnx=1.2, **{"onnx-int8": 4.4}), "onnx-int8"),
        (dict(int8=2.6, onnx=1.2, **{"onnx-int8": 2.0}), "int8"),
    ],
)
def test_auto_takes_the_fastest_copy_of_either_runtime_at_1_1x_float32_or_more(speedups, expected):
    from trainer.serving import variants

    held = ("float32", *speedups)
    assert variants.choose("auto", held, False, "m", checked(**speedups), runtime="auto")[0] == expected


def test_auto_takes_an_onnx_copy_within_1_1x_of_the_fastest_tensorflow_one_for_its_start():
    from trainer.serving import variants

    held = ("float32", "int8", "onnx-int8")
    assert variants.choose("auto", held, False, "m", checked(int8=2.6, **{"onnx-int8": 2.4}), runtime="auto") == (
        "onnx-int8",
        "the onnx-int8 copy measured 2.40x float32's speed at export, within 1.1x of the int8 "
        "copy's, and answers without importing TensorFlow",
    )


@pytest.mark.parametrize(
    "runtime, tensorflow, expected",
    [("auto", True, "onnx-int8"), ("auto", False, "onnx-int8"), ("tensorflow", True, "int8")],
)
def test_an_explicit_precision_takes_that_precisions_fastest_copy_the_runtime_allows(runtime, tensorflow, expected):
    from trainer.serving import variants

    checks = checked(int8=2.6, **{"onnx-int8": 4.4})
    held = ("float32", "int8", "onnx-int8")
    assert variants.choose("int8", held, False, "m", checks, runtime=runtime, tensorflow=tensorflow)[0] == expected


def test_without_tensorflow_onnx_int8_is_taken_only_at_1_1x_the_onnx_copys_speed():
    from trainer.serving import variants

    held = ("float32", "onnx", "onnx-int8")
    copy, why = variants.choose(
        "auto", held, False, "m", checked(onnx=1.2, **{"onnx-int8": 1.3}), runtime="auto", tensorflow=False
    )
    assert copy == "onnx" and why.startswith(
        "the onnx-int8 copy measured 1.30x float32's speed at export, 1.08x the onnx copy's (auto "
        "needs 1.10x the onnx copy's)"
    )


def test_a_model_dir_without_an_onnx_copy_where_tensorflow_is_missing_says_both_ways_out():
    from trainer.serving import variants

    with pytest.raises(UserError) as raised:
        variants.choose("auto", ("float32",), False, "m", {}, runtime="auto", tensorflow=False)
    assert str(raised.value) == (
        "--runtime auto: this Python has no TensorFlow to run m's float32 model, and the dir holds no "
        "ONNX copy; python -m trainer.export_quantized --model-dir m --precision onnx writes it, or "
        f"{INSTALL}"
    )


def test_resolve_logs_which_copy_auto_takes(model_dir, caplog):
    from trainer.serving import variants

    with caplog.at_level(logging.INFO, logger="trainer"):
        assert variants.resolve(model_dir, "auto", cpuinfo_text="") == ("onnx", f"{model_dir}/onnx")
    assert (
        "--runtime auto --precision auto: onnx: the onnx copy measured 1.50x float32's speed at export" in caplog.text
    )


@pytest.mark.slow
def test_the_server_without_tensorflow_keeps_the_vertex_contract(model_dir, tmp_path):
    """Health 503 then 200, predictions, a 4xx for a bad request and for explanations, and a
    clean exit on SIGTERM, from a `trainer.serve` process that cannot import TensorFlow."""
    from test_server import free_port

    port = free_port()
    log = open(tmp_path / "server.log", "w+")
    process = subprocess.Popen(
        [
            sys.executable,
            os.path.join(HELPERS, "without_tensorflow.py"),
            "-m",
            "trainer.serve",
            "--model-dir",
            model_dir,
            "--port",
            str(port),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        answer = httpx.post(f"{url}/predict", json={"instances": TEXTS[:2]}, timeout=30)
        assert answer.status_code == 200 and len(answer.json()["predictions"]) == 2
        assert httpx.post(f"{url}/predict", json={"instances": 5}, timeout=30).status_code == 400
        explained = httpx.post(
            f"{url}/predict", json={"instances": TEXTS[:1], "parameters": {"explain": True}}, timeout=30
        )
        assert explained.status_code == 400 and INSTALL in explained.json()["error"]
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=60)
    log.seek(0)
    lines = log.read()
    assert code == 0, lines
    assert "model ready: onnx" in lines and "stopped" in lines


@pytest.fixture
def doubling_model(tmp_path):
    """An ONNX model of one op: y = x + x, int32 [N, W] of any size."""
    from onnx import TensorProto, helper, save

    spec = lambda name: helper.make_tensor_value_info(name, TensorProto.INT32, ["N", "W"])  # noqa: E731
    graph = helper.make_graph([helper.make_node("Add", ["x", "x"], ["y"])], "doubling", [spec("x")], [spec("y")])
    path = tmp_path / "model.onnx"
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def runs_of(path, monkeypatch):
    """runtime.Runs of `path` on a 2-core machine, each run's thread noted in `.threads`."""
    import threading

    from trainer import hardware
    from trainer.serving.onnx import runtime

    monkeypatch.setattr(hardware, "usable_cores", lambda: 2)
    runs = runtime.Runs(path)
    runs.threads, run = [], runs.session.run

    def noted(*args):
        runs.threads.append(threading.current_thread())
        return run(*args)

    monkeypatch.setattr(runs.session, "run", noted)
    return runs


FEEDS = [{"x": np.full([3, width], width, np.int32)} for width in (1, 5, 2, 9, 4)]


def test_runs_go_side_by_side_one_thread_each_and_come_back_in_order(doubling_model, monkeypatch):
    import threading

    runs = runs_of(doubling_model, monkeypatch)
    got = runs.run(["y"], FEEDS)
    assert [y.tolist() for (y,) in got] == [(2 * feed["x"]).tolist() for feed in FEEDS]
    assert runs.session.get_session_options().intra_op_num_threads == 1
    assert threading.current_thread() not in runs.threads
    assert all(thread.name.startswith("onnx-run") for thread in runs.threads)


def cheapest_cost(widths) -> int:
    """The least padded tokens plus RUN_TOKENS a run over every way to cut `widths` (sorted)
    into consecutive runs of at most ROWS_PER_RUN rows: tried one by one."""
    from trainer.serving.onnx import runtime

    if not widths:
        return 0
    return min(
        runtime.RUN_TOKENS + size * widths[size - 1] + cheapest_cost(widths[size:])
        for size in range(1, min(len(widths), runtime.ROWS_PER_RUN) + 1)
    )


def cost(widths, runs) -> int:
    from trainer.serving.onnx import runtime

    return sum(runtime.RUN_TOKENS + len(widths[run]) * widths[run][-1] for run in runs)


@pytest.mark.parametrize("seed", range(5))
def test_rows_are_cut_into_the_cheapest_runs(seed):
    from trainer.serving.onnx import runtime

    widths = sorted(np.random.default_rng(seed).integers(3, 60, 9).tolist())
    runs = runtime.cut_runs(widths)
    assert [i for run in runs for i in range(run.start, run.stop)] == list(range(len(widths)))
    assert cost(widths, runs) == cheapest_cost(widths)


def test_rows_of_one_length_run_16_at_a_time_the_full_runs_first():
    from trainer.serving.onnx import runtime

    assert [run.stop - run.start for run in runtime.cut_runs([10] * 40)] == [16, 16, 8]


def test_texts_of_many_lengths_reach_the_copy_as_one_batch_across_the_padding_ladder(model_dir, monkeypatch):
    """The copy cuts its runs itself (runtime.cut_runs), so a server's batch of texts of every
    length is one call, not one per padded length, as a SavedModel needs."""
    from trainer.data.padding import padded_to
    from trainer.inference import loaded_model
    from trainer.serving.onnx import runtime

    module = runtime.OnnxModule(os.path.join(model_dir, "onnx"))
    texts = [" ".join(["movie"] * n) for n in range(1, 15)]
    lengths = module.tokenize(texts)["input_mask"].sum(axis=1)
    assert len(set(padded_to(lengths, module.padded_lengths).tolist())) == 3
    calls, predict = [], module.predict_tokens
    monkeypatch.setattr(module, "predict_tokens", lambda features: calls.append(features) or predict(features))
    loaded_model.predict_outputs(module, texts, 64)
    assert len(calls) == 1
