"""`--task embedding` on pairs without a score: the file's columns choose in-batch negatives
(--loss auto), the run is scored as retrieval (MRR@10, nDCG@10, recall@1/@10 of each pair's
second text among the split's, for its first), and its export is the same sentence encoder."""

import random

import pytest
from conftest import metrics_of, read_csv, write_csv
from test_embedding import (
    assert_same_rows,
    evaluated_line,
    quiet_encoder_dir,  # noqa: F401  (a fixture)
    reported_again,
    variant_run,
)

from trainer import config as config_lib
from trainer import task_registry
from trainer.errors import UserError

# Texts of three of the tiny encoder's words; a text's pair is its words mapped by a fixed
# pairing of the vocabulary, in reverse order: nothing alike to an untrained encoder, learnable.
WORDS = "i love hate this movie it is was not good bad great awful fine ok the so very meh a".split()


def paired(words, seed):
    shuffled = random.Random(0).sample(words, len(words))
    partner = {**dict(zip(shuffled[0::2], shuffled[1::2])), **dict(zip(shuffled[1::2], shuffled[0::2]))}
    rng = random.Random(seed)

    def row():
        text = rng.sample(words, 3)
        return " ".join(text), " ".join(partner[w] for w in reversed(text))

    return row


def unscored_pairs(count, seed):
    row = paired(WORDS, seed)
    return [row() for _ in range(count)]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("unscored_pairs")
    return {
        name: write_csv(root / f"{name}.csv", unscored_pairs(count, seed), ("sentence1", "sentence2"))
        for name, count, seed in (("train", 160, 1), ("validation", 40, 2))
    }


def build(*argv):
    return config_lib.build_config(list(argv), {})


# --- the data decides the loss --------------------------------------------------------------------


def test_pairs_without_a_score_train_with_in_batch_negatives_selected_by_mrr(data):
    config = build("--task", "embedding", "--training-file", str(data["train"]))
    assert (config.train.loss, config.train.selection_metric) == ("multiple-negatives", "val_mrr_at_10")
    assert task_registry.from_config(config).summary_metrics[0] == "mrr_at_10"


def test_pairs_with_a_score_column_train_with_cosent(tmp_path):
    scored = write_csv(tmp_path / "scored.csv", [("a b", "b a", 3.5)], ("sentence1", "sentence2", "similarity"))
    config = build("--task", "embedding", "--training-file", str(scored))
    assert (config.train.loss, config.train.selection_metric) == ("cosent", "val_spearman")


def test_loss_names_the_objective_whatever_the_columns(data):
    config = build("--task", "embedding", "--training-file", str(data["train"]), "--loss", "cosent")
    assert (config.train.loss, config.train.selection_metric) == ("cosent", "val_spearman")


def test_a_kind_with_one_loss_refuses_another():
    with pytest.raises(UserError, match=r"^--loss: cosent is not a loss of --task regression \(it has one"):
        build("--task", "regression", "--loss", "cosent")


def test_a_score_column_has_no_meaning_for_in_batch_negatives(data):
    with pytest.raises(UserError, match="^--label-column: has no meaning with --loss multiple-negatives"):
        build("--task", "embedding", "--training-file", str(data["train"]), "--loss", "multiple-negatives",
              "--label-column", "sentence2")  # fmt: skip


def test_a_finished_run_is_read_back_as_the_variant_it_trained():
    run = {"task": "embedding", "hyperparameters": {"loss": "multiple-negatives"}}
    assert task_registry.of_run(run).default_metric == "val_mrr_at_10"
    assert task_registry.of_run({"task": "embedding", "hyperparameters": {}}).default_metric == "val_spearman"


# --- triplets: a hard negative beside each pair ----------------------------------------------------


def triplets(count, seed):
    """(anchor, positive, negative) rows: the negative another row's pair; the anchor its three
    words thrice, 11 tokens: two windows at --max-seq-length 8 (trained_triplets)."""
    row, other = paired(WORDS, seed), paired(WORDS, seed + 100)
    return [(" ".join([anchor] * 3), positive, other()[1]) for anchor, positive in (row() for _ in range(count))]


@pytest.fixture(scope="module")
def triplet_data(tmp_path_factory):
    root = tmp_path_factory.mktemp("triplets")
    return {
        name: write_csv(root / f"{name}.csv", triplets(count, seed), ("anchor", "positive", "negative"))
        for name, count, seed in (("train", 160, 1), ("validation", 40, 2))
    }


def test_a_column_named_negative_is_each_pairs_hard_negative(triplet_data):
    config = build("--task", "embedding", "--training-file", triplet_data["train"])
    assert (config.train.loss, config.data.negative_column) == ("multiple-negatives", "negative")


def test_a_named_hard_negative_column_still_leaves_the_loss_to_the_file(triplet_data):
    config = build("--task", "embedding", "--training-file", triplet_data["train"], "--negative-column", "negative")
    assert (config.train.loss, config.data.negative_column) == ("multiple-negatives", "negative")


def test_a_hard_negative_needs_pairs_without_a_score(tmp_path):
    scored = write_csv(tmp_path / "scored.csv", [("a b", "b a", 3.5)], ("sentence1", "sentence2", "similarity"))
    with pytest.raises(UserError, match="^--negative-column: needs pairs without a score .* not --loss cosent$"):
        build("--task", "embedding", "--training-file", scored, "--negative-column", "other")
    with pytest.raises(UserError, match="^--negative-column: .* not --task classification$"):
        build("--task", "classification", "--negative-column", "other")


def test_an_empty_hard_negative_is_named_with_its_row(tmp_path):
    from trainer.data import splits

    rows = [("i love", "so bad", "meh")] * 4 + [("i love", "so bad", " ")]
    path = write_csv(tmp_path / "triplets.csv", rows, ("anchor", "positive", "negative"))
    config = build("--task", "embedding", "--training-file", path)
    with pytest.raises(UserError, match="triplets.csv line 6, column 'negative': text is empty"):
        splits.load_datasets(config)


def test_a_missing_hard_negative_column_is_named(tmp_path):
    from trainer.data import splits

    path = write_csv(tmp_path / "pairs.csv", [("i love", "so bad")] * 4, ("anchor", "positive"))
    config = build("--task", "embedding", "--training-file", path, "--negative-column", "hard")
    with pytest.raises(UserError, match="no column 'hard' \\(the training data's hard negative column\\)"):
        splits.load_datasets(config)


# --- a run through the CLI ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def trained(quiet_encoder_dir, data, tmp_path_factory):  # noqa: F811
    job_dir = tmp_path_factory.mktemp("unscored") / "job"
    return variant_run(quiet_encoder_dir, data, job_dir, "--max-seq-length", "16")


@pytest.mark.slow  # the trained unscored-pairs run: CI's 2.21 slow line (.ci/run)
def test_the_tiny_model_learns_to_retrieve_each_pair_beyond_its_zero_shot_score(trained):
    metrics = metrics_of(trained)
    assert metrics["hyperparameters"]["loss"] == "multiple-negatives" and metrics["label_kind"] == "pair"
    before, after = metrics["zero_shot"]["validation"], metrics["validation"]
    assert before["mrr_at_10"] + 0.3 < after["mrr_at_10"] and after["recall_at_10"] >= 0.9
    assert {"examples", "loss", "recall_at_1", "recall_at_10", "mrr_at_10", "ndcg_at_10"} <= set(after)


@pytest.mark.slow  # the trained unscored-pairs run: CI's 2.21 slow line (.ci/run)
def test_history_card_and_errors_speak_of_retrieval(trained):
    history = read_csv(trained / "eval_history.csv")
    assert list(history[0])[:6] == ["epoch", "step", "loss", "in_batch_top", "val_loss", "val_mrr_at_10"]
    card = (trained / "MODEL_CARD.md").read_text()
    assert "pairs of texts without a score" in card and "MRR@10" in card
    errors = read_csv(trained / "errors.csv")
    assert list(errors[0]) == ["split", "rank", "positive_rank", "cosine", "text", "text_pair"]
    assert [int(r["positive_rank"]) for r in errors] == sorted((int(r["positive_rank"]) for r in errors), reverse=True)
    page = (trained / "report.html").read_text()
    assert (trained / "report" / "nearest_negatives.png").exists() and "nearest text that is not its pair" in page


@pytest.mark.slow  # the trained unscored-pairs run: CI's 2.21 slow line (.ci/run)
def test_evaluate_scores_a_file_of_pairs_as_the_run_scored_its_validation(trained, data):
    line, expected = evaluated_line(trained, data["validation"]), metrics_of(trained)["validation"]
    assert f"mrr@10 {expected['mrr_at_10']:.4f}" in line and f"recall@1 {expected['recall_at_1']:.4f}" in line


@pytest.mark.slow  # the trained unscored-pairs run: CI's 2.21 slow line (.ci/run); rewrites its report, so last
def test_report_rebuilds_the_errors_of_pairs_as_the_run_wrote_them(trained):
    assert_same_rows(*reported_again(trained), ("positive_rank", "cosine"))


@pytest.fixture(scope="module")
def trained_triplets(quiet_encoder_dir, triplet_data, tmp_path_factory):  # noqa: F811
    """Triplets whose first texts are read in windows: each text of a row is encoded alone,
    so each is cut into windows of its own."""
    job_dir = tmp_path_factory.mktemp("triplets") / "job"
    flags = ("--max-seq-length", "8", "--long-texts", "windows")
    return variant_run(quiet_encoder_dir, triplet_data, job_dir, *flags)


@pytest.mark.slow  # a trained triplets run, by hand (.ci/run's BY_HAND)
def test_triplets_train_each_first_text_against_its_hard_negative(trained_triplets):
    import json

    assert json.loads((trained_triplets / "config.json").read_text())["data"]["negative_column"] == "negative"
    assert "200 triplets, mean" in (trained_triplets / "training.log").read_text()
    metrics = metrics_of(trained_triplets)
    assert metrics["zero_shot"]["validation"]["mrr_at_10"] + 0.3 < metrics["validation"]["mrr_at_10"]


@pytest.mark.slow  # a trained triplets run, by hand (.ci/run's BY_HAND)
def test_pairs_read_in_windows_are_scored_by_their_export_as_the_run_scored_them(trained_triplets, triplet_data):
    """The run's vectors of windowed texts are the export's: trainer.evaluate, through the
    export, finds the run's validation metrics."""
    line, expected = evaluated_line(trained_triplets, triplet_data["validation"]), metrics_of(trained_triplets)
    assert "read in windows of 8" in (trained_triplets / "training.log").read_text()
    validation = expected["validation"]
    assert f"mrr@10 {validation['mrr_at_10']:.4f}" in line and f"recall@1 {validation['recall_at_1']:.4f}" in line
