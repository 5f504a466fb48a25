"""Sentence pairs, regression and multi-label under MirroredStrategy (2 logical CPUs) train like
one device (classification of single texts: test_multidevice.py).

Six training processes take a few minutes, more than the default suite's 10-minute budget
leaves: run them with `VBT_SLOW_TESTS=1 python -m pytest tests/training/test_multidevice_tasks.py`.
"""

import json

import pytest
import tiny_bert
from conftest import write_csv
from test_multidevice import WRAPPER, args, start

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("multidevice_tasks")
    encoder = tiny_bert.write_hf_checkpoint(
        root / "encoder", config={**tiny_bert.CONFIG, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    )
    (root / "wrapper.py").write_text(WRAPPER)
    return root, encoder, None


def task_data(root, task):
    """91 training rows of the task's own tiny data (a last batch of 3: split 2+1 over replicas)."""
    from test_multilabel import topic_rows
    from test_pairs import HEADER as PAIR_HEADER
    from test_pairs import pair_rows
    from test_regression import scored_rows

    rows, header = {
        "regression": (scored_rows, ("sentence", "score")),
        "multi-label": (topic_rows, ("text", "labels")),
        "pairs": (pair_rows, PAIR_HEADER),
    }[task]
    return {
        name: write_csv(root / f"{name}.csv", rows(count, seed), header)
        for name, count, seed in (("train", 91, 1), ("validation", 30, 2), ("test", 30, 3))
    }


# Pairs keep classification's head but feed two texts and segment ids through the replicas.
@pytest.fixture(scope="module", params=["pairs", "regression", "multi-label"])
def task_runs(setup, request):
    """One device and two mirrored replicas side by side, two epochs of one task."""
    base, encoder, _ = setup
    task, root = request.param, base / request.param
    root.mkdir()
    data = task_data(root, task)
    flags = [] if task == "pairs" else ["--task", task]
    arguments = {name: [*args(encoder, data, root / name), "--epochs", "2", *flags] for name in ("single", "mirrored")}
    processes = {
        "single": start(base, arguments["single"]),
        "mirrored": start(base, arguments["mirrored"] + ["--distribution", "mirrored"], LOGICAL_CPUS="2"),
    }
    try:
        outputs = {name: process.communicate(timeout=300)[0] for name, process in processes.items()}
    finally:
        for process in processes.values():
            process.kill()
    for name, process in processes.items():
        assert process.returncode == 0, f"{task} {name}:\n{outputs[name][-3000:]}"
    return task, {name: json.loads((root / name / "metrics.json").read_text()) for name in processes}


def test_every_task_trains_on_two_mirrored_replicas_like_one_device(task_runs):
    from trainer import task_registry

    task, metrics = task_runs
    mirrored, single = metrics["mirrored"], metrics["single"]
    assert (mirrored["device"]["strategy"], mirrored["device"]["replicas"]) == ("mirrored", 2)
    keys = ("loss", *task_registry.by_name(mirrored["task"]).summary_metrics)
    for split in ("train", "validation", "test"):
        assert mirrored[split]["examples"] == single[split]["examples"] == mirrored["dataset_sizes"][split]
        for key in keys:
            assert mirrored[split][key] == pytest.approx(single[split][key], rel=1e-4, abs=1e-6), (split, key)
        if task == "multi-label":
            assert mirrored[split]["thresholds"] == single[split]["thresholds"], split
    assert mirrored["best_epoch"] == single["best_epoch"]
