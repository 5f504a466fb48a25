"""What a tagging run's log says of its data, its head and its length (issue 64, low): a CoNLL
run logged `text 'text'` (a column it has not), "mean pooling" (a tagger pools nothing) and
"1 epochs". One --dry-run of the tiny encoder on a CoNLL file: the slow tier (CI's slow line),
for the default suite's 10 minutes."""

import pytest
from conftest import TINY_TASK_FLAGS
from test_task import run_cli

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def log(tiny_encoder_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("tagging_log")
    sentences = [[("Ada", "B-PER"), ("met", "O"), ("Bo", "B-PER")], [("in", "O"), ("Oslo", "B-LOC")]] * 8
    train = root / "train.conll"
    train.write_text("".join("".join(f"{w}\t{t}\n" for w, t in s) + "\n" for s in sentences))
    result = run_cli(
        "--encoder",
        tiny_encoder_dir,
        "--training-file",
        str(train),
        "--job-dir",
        str(root / "job"),
        "--max-seq-length",
        "16",
        "--dry-run",
        *TINY_TASK_FLAGS,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def line(log: str, start: str) -> str:
    return next(text.split("] ", 1)[-1] for text in log.splitlines() if start in text)


def test_the_data_line_names_tagged_sentences_not_a_text_column(log):
    assert line(log, "data: ").endswith("(tagged sentences, IOB2 tags of LOC, PER)")


def test_the_encoder_line_says_where_a_tagger_reads_each_word(log):
    encoder = line(log, "encoder ")
    assert "tags read at each word's first piece, no pooling" in encoder and "mean pooling" not in encoder


def test_one_epoch_of_one_step_is_counted_in_the_singular(log):
    batch = line(log, "batch ")
    assert "; 1 step per epoch" in batch and ", 1 epoch (--dry-run: one step)" in batch
