"""label_issues.csv: cleanlab's ranking of out-of-sample probabilities, the folds that make the
training split's, the run's own model's share in ranking them, rows named by their file and
line, the report section, the refusals (folds too small among them) and the warning when the
fold models are at chance; cross-fitting end to end in the slow tier."""

import numpy as np
import pytest
from conftest import NEGATIVE, POSITIVE, TINY_TASK_FLAGS, metrics_of, read_csv, write_csv
from test_task import run_cli, run_in_process

from trainer import task_registry
from trainer.training import cross_fit, label_issues

CLASSIFICATION, MULTI_LABEL = task_registry.by_name("classification"), task_registry.by_name("multi-label")


def separable(rows: int, seed: int = 0):
    """(probabilities [rows, 2], true labels): a model sure of each row's true class."""
    rng = np.random.default_rng(seed)
    truth = np.arange(rows) % 2
    confidence = rng.uniform(0.8, 0.99, rows)
    positive = np.where(truth == 1, confidence, 1 - confidence)
    return np.stack([1 - positive, positive], axis=1), truth


def test_planted_flipped_labels_are_flagged_and_ranked_first():
    probabilities, truth = separable(60)
    given, planted = truth.copy(), [4, 17, 33, 50]
    given[planted] = 1 - given[planted]
    flagged, scores = label_issues.rank(CLASSIFICATION, probabilities, given)
    assert sorted(flagged[: len(planted)]) == planted
    assert set(flagged) == set(planted)  # none of the right labels
    assert np.all(scores[planted] < np.delete(scores, planted).min())


def test_other_probabilities_order_the_flagged_rows_but_do_not_choose_them():
    probabilities, truth = separable(60)
    given, planted = truth.copy(), [4, 17, 33, 50]
    given[planted] = 1 - given[planted]
    ranking = probabilities.copy()
    ranking[50] = [0.5, 0.5]  # of the planted flips, doubted least
    ranking[7] = ranking[7, ::-1]  # a right label doubted: not flagged for that
    flagged, scores = label_issues.rank(CLASSIFICATION, probabilities, given, ranking)
    assert set(flagged) == set(planted) and flagged[-1] == 50
    assert list(scores[flagged]) == sorted(scores[flagged])


def test_the_run_model_ranks_a_flip_it_did_not_learn_above_one_the_folds_doubt_more():
    """The mean of the folds' and the run's (early-stopped) model's probabilities: a flip the
    run's model still contradicts moves up, and a model that memorized every row (probability
    near 1 for each given label) leaves the folds' order."""
    folds = np.array([[0.3, 0.7], [0.4, 0.6], [0.45, 0.55]])  # given label 0: doubts row 0 most
    given = np.zeros(3, np.int64)
    early = np.array([[0.6, 0.4], [0.05, 0.95], [0.5, 0.5]])
    memorized = np.array([[0.99, 0.01], [0.98, 0.02], [0.99, 0.01]])
    self_confidence = lambda p: p[np.arange(3), given]  # noqa: E731
    assert list(np.argsort(self_confidence(label_issues.mean_of_views(folds, early)))) == [1, 0, 2]
    assert list(np.argsort(self_confidence(label_issues.mean_of_views(folds, memorized)))) == [0, 1, 2]


@pytest.mark.parametrize("task", ["classification", "multi-label"])
def test_ranking_never_forks_a_process_pool(task, monkeypatch):
    """A fork of a process running TensorFlow's and gRPC's threads can hang the child: a
    multi-worker run's non-chief worker never exited after its export when cleanlab forked one
    process per core."""
    import multiprocessing

    def refuse(*args, **kwargs):
        raise AssertionError("cleanlab forked a multiprocessing.Pool")

    monkeypatch.setattr(multiprocessing, "Pool", refuse)
    probabilities, truth = separable(60)
    labels = truth if task == "classification" else np.eye(2, dtype=int)[truth]
    flagged, _ = label_issues.rank(task_registry.by_name(task), probabilities, labels)
    assert len(flagged) == 0


def test_a_missing_multi_label_is_flagged_first():
    rng = np.random.default_rng(1)
    truth = (np.arange(40)[:, None] % np.array([2, 3]) == 0).astype(int)  # two labels
    probabilities = np.where(truth == 1, rng.uniform(0.85, 0.99, truth.shape), rng.uniform(0.01, 0.15, truth.shape))
    given = truth.copy()
    given[7, 1] = 1 - given[7, 1]
    flagged, scores = label_issues.rank(MULTI_LABEL, probabilities, given)
    assert flagged[0] == 7 and scores.argmin() == 7


def test_every_training_row_is_held_out_by_exactly_one_fold_with_classes_spread_evenly():
    labels = np.array([0] * 40 + [1] * 20 + [2] * 12)
    folds = cross_fit.fold_of_rows(labels, 4, seed=42, strata=labels)
    assert sorted(np.unique(folds)) == [0, 1, 2, 3]
    for fold in range(4):
        assert list(np.bincount(labels[folds == fold], minlength=3)) == [10, 5, 3]
    assert np.array_equal(folds, cross_fit.fold_of_rows(labels, 4, seed=42, strata=labels))


def test_multi_label_rows_are_dealt_into_folds_of_equal_size():
    folds = cross_fit.fold_of_rows(np.zeros((30, 3)), 3, seed=0)
    assert list(np.bincount(folds)) == [10, 10, 10]


def test_rows_are_named_by_their_file_and_the_line_an_editor_shows(tmp_path):
    from trainer.config import Config
    from trainer.data.splits import load_datasets

    rows = [("i love it", "pos"), ('"a text\nover two lines"', "neg"), ("so bad", "neg")] * 5
    for name, extra in (("train", [("great movie", "pos")]), ("validation", [])):
        (tmp_path / f"{name}.csv").write_text("text,label\n" + "".join(f"{t},{label}\n" for t, label in rows + extra))
    path = tmp_path / "validation.csv"
    config = Config()
    config.data.training_file, config.data.validation_file = str(tmp_path / "train.csv"), str(path)
    datasets = load_datasets(config)
    located = label_issues.locate(datasets, "validation", np.array([5, 0, 1]))
    # Row 5 is the third record of the second group: lines 1 (header), 2, 3-4, 5, 6, 7-8, 9.
    assert list(located["row"]) == [9, 2, 3]
    assert list(located["text"]) == ["so bad", "i love it", "a text\nover two lines"]
    assert set(located["file"]) == {str(path)}


def test_the_report_section_shows_the_top_rows_of_this_runs_file(tmp_path):
    from trainer.reporting import wrong_labels as report_section

    (tmp_path / "label_issues.csv").write_text(
        "split,file,row,given_label,suggested_label,score,text\n"
        "train,t.csv,7,pos,neg,0.01,so bad\nvalidation,v.csv,3,neg,pos,0.2,i love it\n"
    )
    block = {
        "file": "label_issues.csv",
        "rows": 2,
        "folds": 4,
        "method": "m",
        "splits": {"train": {"flagged": 1, "of": 90}, "validation": {"flagged": 1, "of": 30}},
    }
    section = report_section.section(str(tmp_path), {"label_issues": block})
    assert section["total"] == 2 and [r["row"] for r in section["rows"]] == [7, 3]
    # A file an earlier run left in the job dir is not this run's: metrics.json decides.
    assert report_section.section(str(tmp_path), {"label_issues": None}) is None


def test_find_label_issues_with_regression_stops_before_training(tiny_encoder_dir, tmp_path):
    rows = write_csv(
        tmp_path / "scores.csv",
        [(text, str(i % 5 / 4)) for i, text in enumerate(POSITIVE + NEGATIVE)],
        ("text", "score"),
    )
    result = run_in_process(
        "--encoder",
        tiny_encoder_dir,
        "--training-file",
        rows,
        "--task",
        "regression",
        "--job-dir",
        tmp_path / "job",
        "--max-seq-length",
        "16",
        "--find-label-issues",
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.strip().splitlines() == [
        "error: --find-label-issues: needs classes or labels; --task regression has no class or "
        "label per row for cleanlab's ranking to judge"
    ]


# --- too few rows: refused before training, or a warning after -----------------------------------


def test_folds_too_small_to_learn_from_are_refused_naming_the_flags_and_rows_per_fold():
    from trainer.errors import UserError

    labels = np.array([0, 1] * 9)  # 18 training rows: a fold's model would see 6-7 of a class
    folds = cross_fit.fold_of_rows(labels, 4, seed=0, strata=labels)
    with pytest.raises(
        UserError,
        match=r"^--find-label-issues: 18 training rows in 4 folds "
        r"\(--label-issue-folds\) train each fold's model on 13-14 rows, and fold "
        r"1's would see 6 of the 9 rows of class 'neg'; a fold's model needs at "
        r"least 10 rows of every class",
    ):
        cross_fit.check_fold_sizes(CLASSIFICATION, labels, folds, ["neg", "pos"])


def test_folds_holding_the_minimum_of_every_class_are_accepted():
    labels = np.array([0, 1] * 14)  # 4 folds hold out 3-4 of each class: 10-11 left to train on
    cross_fit.check_fold_sizes(
        CLASSIFICATION, labels, cross_fit.fold_of_rows(labels, 4, seed=0, strata=labels), ["neg", "pos"]
    )
    labels = np.array([0] * 14 + [1] * 13)  # 9-10 of 'pos' left: one fold short
    with pytest.raises(Exception, match="9 of the 13 rows of class 'pos'"):
        cross_fit.check_fold_sizes(
            CLASSIFICATION, labels, cross_fit.fold_of_rows(labels, 4, seed=0, strata=labels), ["neg", "pos"]
        )


def test_a_multi_label_label_with_too_few_rows_in_a_fold_is_refused():
    labels = np.zeros((40, 2))
    labels[:, 0], labels[:8, 1] = 1, 1  # 'sports' on 8 rows only
    folds = cross_fit.fold_of_rows(labels, 4, seed=0)
    with pytest.raises(Exception, match=r"of the 8 rows of label 'sports'; .* at least 10 rows of every label"):
        cross_fit.check_fold_sizes(MULTI_LABEL, labels, folds, ["news", "sports"])


def task_flags_context(labels, dry_run: bool):
    """What check_task_flags reads of a run that has loaded its data and resolved its runtime."""
    from types import SimpleNamespace

    from trainer.config import Config

    config = Config()
    config.train.find_label_issues, config.train.dry_run = True, dry_run
    return SimpleNamespace(
        config=config,
        task=CLASSIFICATION,
        datasets=SimpleNamespace(train=SimpleNamespace(labels=labels), labels=SimpleNamespace(names=["neg", "pos"])),
        runtime=SimpleNamespace(plan=SimpleNamespace(strategy="default")),
    )


def test_the_fold_sizes_are_checked_with_the_task_flags_but_not_in_a_dry_run():
    from trainer.errors import UserError
    from trainer.training import task_flags

    labels = np.array([0, 1] * 9)
    with pytest.raises(UserError, match="^--find-label-issues: 18 training rows in 4 folds"):
        task_flags.check_task_flags(task_flags_context(labels, dry_run=False))
    # A dry run keeps a batch of the rows: its folds are small by design.
    task_flags.check_task_flags(task_flags_context(labels, dry_run=True))


def test_find_label_issues_on_twenty_rows_stops_before_training(tiny_encoder_dir, tmp_path):
    rows = write_csv(
        tmp_path / "train.csv", [(text, "pos") for text in POSITIVE] + [(text, "neg") for text in NEGATIVE]
    )
    result = run_in_process(
        "--encoder",
        tiny_encoder_dir,
        "--training-file",
        rows,
        "--job-dir",
        tmp_path / "job",
        "--max-seq-length",
        "16",
        "--find-label-issues",
    )
    assert result.returncode == 2, result.stdout + result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: --find-label-issues: 18 training rows in 4 folds"), line
    assert not (tmp_path / "job" / "checkpoints").exists()


def fold_probabilities(right: list, folds: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Each row's [p(0), p(1)]: 0.9 for its given label where `right[fold]`, else 0.1."""
    sure = np.where(np.asarray(right)[folds], 0.9, 0.1)
    positive = np.where(labels == 1, sure, 1 - sure)
    return np.stack([1 - positive, positive], axis=1)


def test_fold_models_better_than_the_most_common_class_give_no_warning():
    labels, folds = np.array([0, 1, 1, 0, 1, 1]), np.array([0, 0, 0, 1, 1, 1])
    probabilities = fold_probabilities([True, True], folds, labels)
    assert label_issues.chance_warning(CLASSIFICATION, probabilities, labels, folds) is None


def test_a_fold_model_at_chance_warns_that_the_ranking_cannot_be_trusted():
    labels, folds = np.array([0, 1, 1, 0, 1, 1]), np.array([0, 0, 0, 1, 1, 1])
    probabilities = fold_probabilities([True, True], folds, labels)
    probabilities[3] = [0.4, 0.6]  # fold 2 answers 'pos' for every row: right on 2 of 3, as is 'pos'
    warning = label_issues.chance_warning(CLASSIFICATION, probabilities, labels, folds)
    assert warning.startswith(
        "the training rows' ranking cannot be trusted: 1 of 2 fold models "
        "did no better than chance (fold 2 (trained on 3 rows) was right on "
        "67% of its 3 held-out rows, always answering their most common "
        "class on 67%)"
    ), warning


def test_a_multi_label_fold_model_that_predicts_no_label_warns():
    labels = np.array([[1, 0], [0, 0], [0, 0], [0, 1], [1, 0], [0, 0]])
    folds = np.array([0, 0, 0, 1, 1, 1])
    probabilities = np.where(labels == 1, 0.9, 0.1)
    assert label_issues.chance_warning(MULTI_LABEL, probabilities, labels, folds) is None
    probabilities[3:] = 0.1  # fold 2 never predicts a label: as right as answering "none"
    assert "1 of 2 fold models did no better than chance (fold 2 " in label_issues.chance_warning(
        MULTI_LABEL, probabilities, labels, folds
    )


def test_the_report_section_carries_the_warning_of_metrics_json(tmp_path):
    from trainer.reporting import wrong_labels as report_section

    (tmp_path / "label_issues.csv").write_text("split,file,row,given_label,suggested_label,score,text\n")
    block = {
        "file": "label_issues.csv",
        "rows": 0,
        "folds": 4,
        "method": "m",
        "splits": {"train": {"flagged": 0, "of": 90}},
        "warning": "the ranking cannot be trusted",
    }
    assert report_section.section(str(tmp_path), {"label_issues": block})["warning"] == "the ranking cannot be trusted"


def test_report_html_shows_the_warning_above_the_rows(tmp_path):
    import jinja2

    from trainer.reporting import wrong_labels as report_section

    (tmp_path / "label_issues.csv").write_text("split,file,row,given_label,suggested_label,score,text\n")
    block = {
        "file": "label_issues.csv",
        "rows": 0,
        "folds": 4,
        "method": "m",
        "splits": {"train": {"flagged": 0, "of": 90}},
        "warning": "the ranking cannot be trusted",
    }
    template = jinja2.Environment(
        loader=jinja2.PackageLoader("trainer.reporting", "templates"), autoescape=True
    ).get_template("label_issues.html.j2")
    html = template.render(label_issues=report_section.section(str(tmp_path), {"label_issues": block}))
    assert '<p class="warning">The ranking cannot be trusted.</p>' in html


# --- end to end ----------------------------------------------------------------------------------


def noisy_rows(count, seed, flipped):
    """Separable pos/neg texts; the rows at indices `flipped` carry the other label."""
    import random

    rng, rows = random.Random(seed), []
    for i in range(count):
        label = "pos" if i % 2 else "neg"
        text = rng.choice(POSITIVE if label == "pos" else NEGATIVE)
        rows.append((text, ("neg" if label == "pos" else "pos") if i in flipped else label))
    return rows


@pytest.mark.slow  # three tiny trainings: the slow tier, run by hand (VBT_SLOW_TESTS=1)
def test_cross_fitting_lists_the_planted_training_flips(tiny_encoder_dir, tmp_path):
    flipped = {3, 10, 51, 88, 140, 201}
    files = {
        "train": write_csv(tmp_path / "train.csv", noisy_rows(240, 1, flipped)),
        "validation": write_csv(tmp_path / "validation.csv", noisy_rows(40, 2, {5})),
    }
    job_dir = tmp_path / "job"
    result = run_cli(
        "--encoder",
        tiny_encoder_dir,
        "--training-file",
        files["train"],
        "--validation-file",
        files["validation"],
        "--job-dir",
        job_dir,
        "--epochs",
        "5",
        "--batch-size",
        "8",
        "--learning-rate",
        "1e-2",
        "--max-seq-length",
        "16",
        "--mixed-precision",
        "off",
        *TINY_TASK_FLAGS,
        "--find-label-issues",
        "--label-issue-folds",
        "3",
        timeout=900,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    issues = read_csv(job_dir / "label_issues.csv")
    train = [int(r["row"]) for r in issues if r["split"] == "train"]
    planted_lines = {i + 2 for i in flipped}  # the header is line 1
    # Every training row listed is a planted flip; a tiny fold model may miss one of the six
    # (its texts recur with the right label, and some are hard for a 2-layer encoder).
    assert set(train) <= planted_lines and len(train) >= 4, issues
    assert [int(r["row"]) for r in issues if r["split"] == "validation"][:1] == [7]
    assert [float(r["score"]) for r in issues] == sorted(float(r["score"]) for r in issues)
    block = metrics_of(job_dir)["label_issues"]
    assert block["folds"] == 3 and block["splits"]["train"]["of"] == 240
    assert block["warning"] is None  # the fold models learned the texts
    assert metrics_of(job_dir)["durations"]["label_issues"] > 0
    assert "label issues: fold 3/3" in result.stdout and not (job_dir / "cross_fit").exists()
    assert "the run's model (its best epoch) predicts its 240 training rows" in result.stdout
    assert "Labels that look wrong" in (job_dir / "report.html").read_text()


def test_a_class_with_fewer_rows_than_folds_is_dealt_at_random_without_a_warning():
    import warnings

    labels = np.array([0] * 10 + [1] * 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        folds = cross_fit.fold_of_rows(labels, 3, seed=0, strata=labels)
    assert list(np.bincount(folds)) == [4, 4, 4]


def test_fewer_training_rows_than_folds_is_an_error_naming_the_flag():
    from trainer.errors import UserError

    with pytest.raises(UserError, match=r"^--label-issue-folds: 4 folds need at least 4 training rows, got 3"):
        cross_fit.fold_of_rows(np.array([0, 1, 0]), 4, seed=0)
