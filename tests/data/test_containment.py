"""Held-out texts found inside training texts (issue #65): SST-2's GLUE training set holds every
phrase of its sentences, so a split of it is scored on words the model trained on; a run counts
such texts, warns with examples, and records the count in metrics.json and the report."""

import time

from trainer import config as config_lib
from trainer.data import leakage, splits
from trainer.reporting import html
from trainer.training import held_out
from trainer.training.context import RunContext

SENTENCE = "a venturesome , beautifully realized mood piece that reveals its director 's eye ."


def write(path, rows, header="sentence,label"):
    path.write_text(header + "\n" + "".join(f'"{text}",{label}\n' for text, label in rows), encoding="utf-8")
    return str(path)


def test_a_phrase_of_a_longer_training_text_is_counted_with_its_example():
    found = leakage.find_contained(["beautifully realized mood piece that reveals"], [SENTENCE])
    assert (found.count, found.checked) == (1, 1)
    assert found.examples == [("beautifully realized mood piece that reveals", SENTENCE)]


def test_case_punctuation_and_spacing_do_not_hide_a_copy():
    found = leakage.find_contained(["Beautifully realized -- mood   piece, that"], [SENTENCE])
    assert found.count == 1


def test_only_whole_words_count():
    # "realized mood piece that reveal" is not five of the sentence's words: "reveals" is.
    assert leakage.find_contained(["realized mood piece that reveal"], [SENTENCE]).count == 0


def test_texts_under_five_words_are_not_looked_for():
    assert leakage.find_contained(["mood piece that reveals"], [SENTENCE]).count == 0


def test_an_exact_repeat_is_left_to_the_overlap_count():
    assert leakage.find_contained([SENTENCE], [SENTENCE]).count == 0


def test_whole_new_sentences_are_not_counted():
    official_dev = [
        "it 's a charming and often affecting journey .",
        "the acting , costumes , music , cinematography and sound are all astounding .",
    ]
    assert leakage.find_contained(official_dev, [SENTENCE, "a charming and often affecting"]).count == 0


def test_the_count_costs_a_few_reads_of_the_training_words_on_100000_rows():
    """Linear in the training words, measured as a ratio to splitting them into words once on
    this thread (CI's machines differ in speed; a comparison of every held-out text with every
    training row would cost hundreds of reads)."""
    training = [f"row {i} of the training set says word{i % 997} and word{i % 991} twice" for i in range(100_000)]
    wanted = [f"of the training set says word{i} and" for i in range(1_000)]
    start = time.thread_time()
    for text in training:
        leakage.words(text)
    one_read = time.thread_time() - start
    start = time.thread_time()
    found = leakage.find_contained(wanted, training)
    assert time.thread_time() - start < 6 * one_read
    assert found.count == 997


def context(tmp_path, train, validation, test=None):
    argv = [
        "--training-file",
        write(tmp_path / "train.csv", train),
        "--validation-file",
        write(tmp_path / "validation.csv", validation),
        "--min-examples-per-class",
        "1",
        "--job-dir",
        str(tmp_path / "job"),
    ]
    if test:
        argv += ["--testing-file", write(tmp_path / "test.csv", test)]
    config = config_lib.build_config(argv, environ={})
    return RunContext(config=config, environ={}, paths=None, is_chief=True, datasets=splits.load_datasets(config))


TRAIN = [(SENTENCE, 1), ("a dull , lifeless exercise in tedium from start to finish .", 0)]


def test_a_run_warns_with_the_count_and_an_example(tmp_path, caplog):
    ctx = context(
        tmp_path,
        TRAIN,
        [
            ("beautifully realized mood piece that reveals", 1),
            ("an utterly new sentence about another film entirely", 0),
        ],
    )
    with caplog.at_level("INFO", logger="trainer"):
        held_out.check_containment(ctx)
    assert (
        "warning: 1 of 2 validation texts appear inside training texts (e.g. 'beautifully "
        "realized mood piece that reveals' inside"
    ) in caplog.text
    assert "validation scores will be optimistic" in caplog.text
    assert ctx.contained["validation"]["contained"] == 1
    assert ctx.contained["validation"]["examples"][0]["inside"] == SENTENCE


def test_a_run_on_whole_new_sentences_says_nothing(tmp_path, caplog):
    ctx = context(
        tmp_path,
        TRAIN,
        [
            ("an utterly new sentence about another film entirely", 1),
            ("yet another sentence nobody trained on at all", 0),
        ],
        test=[("and a third one that is nowhere in training", 1), ("the last sentence of this small test file", 0)],
    )
    with caplog.at_level("INFO", logger="trainer"):
        held_out.check_containment(ctx)
    assert "appear inside" not in caplog.text
    assert [ctx.contained[name]["contained"] for name in ("validation", "test")] == [0, 0]


def test_the_report_and_card_say_the_scores_are_optimistic():
    metrics = {
        "contained_texts": {
            "validation": leakage.Contained(215, 1000, [], 9000).as_json(False),
            "test": leakage.Contained(0, 1000, [], 9000).as_json(False),
        }
    }
    note = html.contained_note(metrics)
    assert note.startswith("215 of 1,000 validation texts appear inside training texts")
    assert "test" not in note
    assert html.contained_note({}) is None  # a run from before the count
