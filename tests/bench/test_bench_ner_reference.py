"""bench/ner_reference.py, the transformers tagger bench/ner.py compares the trainer with: a run
killed after an epoch goes on from it (--checkpoint) to the result an unbroken run gives, since
all-mpnet-base-v2 on WikiANN takes longer in float32 than a working session holds."""

import json
import os
import sys

import pytest
from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "bench"))
import ner_reference  # noqa: E402

pytest.importorskip("torch")
pytest.importorskip("transformers")

SENTENCES = [
    [("i", "O"), ("love", "B-PER"), ("this", "I-PER"), ("movie", "O")],
    [("the", "B-LOC"), ("movie", "O"), ("is", "O"), ("great", "B-ORG"), ("!", "O")],
    [("it", "O"), ("was", "B-LOC"), ("so", "I-LOC"), ("bad", "O")],
    [("a", "B-ORG"), ("fine", "I-ORG"), ("movie", "O"), (".", "O")],
] * 4


@pytest.fixture
def files(tmp_path):
    import hf_reference

    encoder = hf_reference.write_checkpoint("distilbert", tmp_path / "encoder")
    conll = tmp_path / "train.conll"
    conll.write_text("\n\n".join("\n".join(f"{w}\t{t}" for w, t in s) for s in SENTENCES) + "\n")
    return tmp_path, [
        "--encoder",
        encoder,
        "--train",
        str(conll),
        "--dev",
        str(conll),
        "--epochs",
        "3",
        "--learning-rate",
        "5e-3",
        "--batch-size",
        "4",
        "--max-length",
        "16",
    ]


def scores(path) -> list:
    """Each epoch's mean training loss (equal only on the same trajectory) and dev F1."""
    with open(path) as f:
        return [(h["epoch"], h["loss"], h["f1"]) for h in json.load(f)["history"]]


def killed_in_the_second_epoch(monkeypatch):
    """ner_reference.evaluate, raising KeyboardInterrupt on its second call (epoch 1 is kept)."""
    evaluate, calls = ner_reference.evaluate, []

    def evaluate_or_die(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return evaluate(*args, **kwargs)

    monkeypatch.setattr(ner_reference, "evaluate", evaluate_or_die)
    return calls


def test_a_run_killed_after_its_first_epoch_goes_on_to_the_unbroken_runs_scores(files, monkeypatch):
    tmp_path, flags = files
    ner_reference.main(flags + ["--output", str(tmp_path / "unbroken.json")])
    calls = killed_in_the_second_epoch(monkeypatch)
    resumed = flags + ["--output", str(tmp_path / "resumed.json"), "--checkpoint", str(tmp_path / "kept")]
    with pytest.raises(KeyboardInterrupt):
        ner_reference.main(resumed)
    assert not (tmp_path / "resumed.json").exists()
    monkeypatch.undo()
    ner_reference.main(resumed)
    assert scores(tmp_path / "resumed.json") == scores(tmp_path / "unbroken.json")
    assert len(calls) == 2 and not (tmp_path / "kept").exists()


def test_an_epoch_kept_with_other_settings_is_refused_not_mixed_in(files, monkeypatch, capsys):
    tmp_path, flags = files
    killed_in_the_second_epoch(monkeypatch)
    kept = ["--output", str(tmp_path / "r.json"), "--checkpoint", str(tmp_path / "kept")]
    with pytest.raises(KeyboardInterrupt):
        ner_reference.main(flags + kept)
    monkeypatch.undo()
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit:
        ner_reference.main(flags + kept + ["--learning-rate", "1e-3"])
    assert exit.value.code == 2
    assert capsys.readouterr().err.startswith(f"error: --checkpoint {tmp_path / 'kept'} was trained with")
    assert (tmp_path / "kept" / "state.pt").exists()
