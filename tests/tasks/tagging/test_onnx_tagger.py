"""A tagger's ONNX copies (issue 66): the export writes the tagger's network as the graph, with
tagging.json beside it (trainer/tasks/tagging/onnx_copy.py reads the words, windows and entities
around it), checked text by text against the SavedModel; trainer.predict without TensorFlow,
trainer.serve and trainer.evaluate answer with the SavedModel's entities, words and tags.

The model is tests/tasks/tagging/test_tagging_windows.py's tiny tagger (a random head, windows of 10
pieces), exported here, its copies written and checked by the export's own code (copies.py,
quantize.export_checked), no training; a trained run's copies are in test_onnx_export.py's slow
tier.
"""

import json
import pathlib
import random

import numpy as np
import pytest
from test_onnx_runtime import without_tensorflow
from test_tagging_windows import NAMES, SEQ, WORDS, tagger

# The slow tier (CI's slow line runs it): the tiny tagger's export and its ONNX copy written and
# checked take about 80 s of one worker, which the default suite's 10 minutes cannot hold.
pytestmark = pytest.mark.slow

_rng = random.Random(5)
# Texts of one window to several, more windows in all than one run of 16, and hard ones
TEXTS = [" ".join(_rng.choice(WORDS) for _ in range(_rng.randint(1, 30))) for _ in range(24)] + [
    "",
    "Zoë met Ann in São Paulo !",
    "lone \u200d joiner",
    "tab\tand\x00nul",
    "   ",
]


def build(encoder_dir, cache_dir):
    """() -> (preprocessor, the tiny tagger), as a run builds them."""
    from trainer.modeling.encoders import load_encoder

    def built():
        encoder = load_encoder(encoder_dir, seq_length=SEQ, cache_dir=cache_dir)
        return encoder.preprocessor, tagger(encoder)

    return built


@pytest.fixture(scope="module")
def exported(tiny_encoder_dir, tmp_path_factory):
    """(model dir, build, the loaded export, its entities of TEXTS): the tiny tagger's
    SavedModel as a run writes it."""
    from trainer import task_registry
    from trainer.inference import loaded_model
    from trainer.serving import export
    from trainer.tasks.tagging import export as tagger_export

    root = tmp_path_factory.mktemp("onnx_tagger")
    built = build(tiny_encoder_dir, str(root / "cache"))
    preprocessor, network = built()
    path = str(root / "model")
    export.export(tagger_export.TaggingModule(preprocessor, network, NAMES, SEQ), path)
    reference = export.load_module(path)
    entities = task_registry.by_name("token-classification").agreement_values(
        loaded_model.predict_outputs(reference, TEXTS, 8)
    )
    return path, built, reference, entities


@pytest.fixture(scope="module")
def model_dir(exported):
    """The model dir with its float32 ONNX copy, written and checked by the export's code as a
    run checks it (results.write_copy: its own tokens, its outputs within 1e-4), on TEXTS;
    (path, the check's figures)."""
    from trainer import task_registry
    from trainer.serving import quantize
    from trainer.serving.onnx import copies

    path, built, reference, entities = exported
    task = task_registry.by_name("token-classification")
    copy, _ = copies.float32_copy(built, reference.classifier_variables, reference, task, NAMES, SEQ, False)
    return path, quantize.export_checked(
        copy,
        reference,
        path,
        "onnx",
        task,
        np.array(TEXTS, object),
        None,
        entities,
        NAMES,
        8,
        own_tokens=True,
        max_difference=1e-4,
    )


@pytest.fixture(scope="module")
def texts_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("onnx_tagger_input") / "in.jsonl"
    path.write_text("".join(json.dumps({"text": text}) + "\n" for text in TEXTS))
    return str(path)


def test_the_float32_copy_is_the_network_with_tagging_json_and_passes_the_check_text_by_text(model_dir):
    from trainer.serving import variants

    path, figures = model_dir
    assert {p.name for p in pathlib.Path(path, "onnx").iterdir()} == {
        "model.onnx",
        "tokenizer.json",
        "packing.json",
        "tagging.json",
        "onnx.json",
    }
    assert json.loads(pathlib.Path(path, "onnx", "onnx.json").read_text())["outputs"] == ["logits"]
    assert variants.signature_of(path, f"{path}/onnx").task().name == "token-classification"
    assert figures["passed"] and figures["label_agreement"] == 1.0 and figures["token_rows_differing"] == 0
    assert 0 < figures["max_difference"] <= 1e-4


def same_entities(got, expected) -> bool:
    """`got` are the `expected` entities: labels, texts and offsets equal, scores within 1e-4
    (or both None: an empty text's)."""
    return got == (expected and [{**e, "score": pytest.approx(e["score"], abs=1e-4)} for e in expected])


def test_predict_without_tensorflow_gives_the_savedmodels_entities_words_and_tags(
    exported, model_dir, texts_file, tmp_path
):
    """Against the TensorFlow runtime's columns of the same rows (trainer.predict's own
    add_predictions, the SavedModel loaded)."""
    import pandas as pd

    from trainer.serving import predict_file

    expected = pd.DataFrame({"text": TEXTS})
    predict_file.add_predictions(expected, exported[2], TEXTS, 8)
    result = without_tensorflow(
        "trainer.predict",
        "--model-dir",
        model_dir[0],
        "--input",
        texts_file,
        "--output",
        tmp_path / "onnx.jsonl",
        "--runtime",
        "onnx",
    )
    assert result.returncode == 0, result.stderr
    got = [json.loads(line) for line in (tmp_path / "onnx.jsonl").read_text().splitlines()]
    assert sum(len(row or []) for row in expected["entities"]) > len(TEXTS)  # entities to compare
    assert len(got) == len(TEXTS)
    for row, wanted in zip(got, expected.to_dict("records")):
        assert same_entities(row.pop("entities"), wanted.pop("entities"))
        assert row == wanted


def test_the_server_answers_the_savedmodels_entities(exported, model_dir):
    """Against the TensorFlow server's batch function on the SavedModel's signature."""
    from trainer.inference import loaded_model
    from trainer.serving import protocol
    from trainer.serving.server import ModelService

    expected = protocol.predict_instances(loaded_model.signature(exported[2]), TEXTS, 8)[0]
    service = ModelService(model_dir[0], max_batch_size=8, max_wait=0.01, runtime="onnx")
    answers = service.load()(TEXTS)[0]
    assert len(answers) == len(TEXTS)
    for answer, wanted in zip(answers, expected):
        assert same_entities(answer.pop("entities"), wanted.pop("entities"))
        assert answer == wanted


@pytest.fixture(scope="module")
def copy_tokens(model_dir):
    """The float32 copy's `tokenize` of TEXTS (its tagger alone, no TensorFlow)."""
    from trainer.tasks.tagging import onnx_copy as tagger_copy

    return tagger_copy.Tagger.from_dir(f"{model_dir[0]}/onnx").tokenize(TEXTS)


def spoiled(features, change):
    features = {name: value.copy() for name, value in features.items()}
    change(features)
    return features


def test_the_check_counts_the_texts_whose_words_or_windows_differ(copy_tokens):
    """Rows are windows: a text's window spoilt counts that text; one more window read in the
    first text moves every row after it, and counts that text alone."""
    from trainer.tasks.tagging import onnx_copy as tagger_copy

    features = copy_tokens
    window = int(features["word_window"][2, 0])  # the third text's first window

    def another_word_id(f):
        f["input_word_ids"][window, 1] += 1

    def one_more_window(f):
        last = int(f["word_window"][0].max())  # the first text's last window
        for name in ("input_word_ids", "input_mask", "input_type_ids"):
            f[name] = np.insert(f[name], last + 1, f[name][last], axis=0)
        f["word_window"][f["word_window"] > last] += 1
        f["word_window"][0, (f["word_start"][0] >= 0).sum() - 1] = last + 1  # its last word read there

    assert tagger_copy.texts_differing(features, features).tolist() == []
    assert tagger_copy.texts_differing(features, spoiled(features, another_word_id)).tolist() == [2]
    assert tagger_copy.texts_differing(
        features, spoiled(features, lambda f: f["word_end"].__setitem__((4, 0), 99))
    ).tolist() == [4]
    assert tagger_copy.texts_differing(features, spoiled(features, one_more_window)).tolist() == [0]


def int8_copy(exported):
    """copies.int8_copy of the model dir's float32 copy, checked on TEXTS, its nodes ranked on
    the first 8 if need be."""
    from trainer import task_registry
    from trainer.serving.onnx import copies

    path, _, reference, entities = exported
    rows = {"texts": np.array(TEXTS, object), "pairs": None, "labels": entities, "label_names": NAMES}
    return copies.int8_copy(
        path,
        reference,
        task_registry.by_name("token-classification"),
        rows,
        lambda: (np.array(TEXTS[:8], object), None),
        8,
    )


def test_the_int8_copy_is_quantized_from_the_float32_copys_folder_tagging_json_and_all(exported, model_dir, tmp_path):
    from trainer.inference import loaded_model

    path = model_dir[0]
    (write, load), _, _ = int8_copy(exported)
    write(str(tmp_path / "int8"))
    assert {p.name for p in (tmp_path / "int8").iterdir()} == {
        "model.onnx",
        "tokenizer.json",
        "packing.json",
        "tagging.json",
        "onnx.json",
    }
    assert (tmp_path / "int8" / "tagging.json").read_bytes() == pathlib.Path(path, "onnx", "tagging.json").read_bytes()
    facts, source = (json.loads(pathlib.Path(d, "onnx.json").read_text()) for d in (tmp_path / "int8", f"{path}/onnx"))
    assert (facts["precision"], facts["task_outputs"]) == ("int8", source["task_outputs"])
    answered, expected = (
        loaded_model.predict_outputs(model, TEXTS, 8, wanted=("entity_count", "word_count"))
        for model in (load(str(tmp_path / "int8")), exported[2])
    )
    assert answered["word_count"].tolist() == expected["word_count"].tolist()
    assert answered["entity_count"].sum() > 0


def test_the_int8_float_fallback_ranks_a_taggers_nodes_on_its_windows(exported, model_dir, monkeypatch):
    """Forced here (no agreement passes): the graph is smoothed on the ranking texts' windows,
    then each node is scored on them, the graph's inputs (a tagger's `tokenize` gives its words'
    features too)."""
    from trainer.serving import agreement

    monkeypatch.setattr(agreement, "MIN_LABEL_AGREEMENT", 1.01)
    _, kept, line = int8_copy(exported)
    assert kept and "and smoothed (" in line and "kept float (the most sensitive on 128 training rows" in line
    assert ": entities agreeing at " in line


def test_evaluate_without_tensorflow_scores_the_copy_as_it_scores_the_savedmodel(model_dir, tmp_path):
    from test_tagging import write_conll
    from test_task import run_in_process

    rng = random.Random(2)
    labelled = write_conll(
        tmp_path / "gold.conll",
        [
            [(rng.choice(WORDS), rng.choice(["O", "O", "B-PER", "B-LOC", "I-LOC"])) for _ in range(rng.randint(2, 25))]
            for _ in range(30)
        ],
    )
    scored = {}
    for runtime in ("tensorflow", "onnx"):
        output = tmp_path / f"{runtime}.json"
        args = ("--model-dir", model_dir[0], "--input", labelled, "--runtime", runtime, "--output", output)
        result = (
            run_in_process(*args, module="trainer.evaluate")
            if runtime == "tensorflow"
            else without_tensorflow("trainer.evaluate", *args)
        )
        assert result.returncode == 0, result.stderr
        scored[runtime] = json.loads(output.read_text())
    metrics = scored["tensorflow"]["metrics"]
    assert metrics["entities"] > 0 and scored["onnx"]["metrics"] == {
        **metrics,
        "loss": pytest.approx(metrics["loss"], abs=1e-4),
    }
    assert scored["onnx"]["errors"] == scored["tensorflow"]["errors"]
