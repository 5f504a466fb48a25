"""IOB2 tags and entity scores (trainer/tasks/tagging): seqeval's strict IOB2 rules, checked
against seqeval 1.2.2's own results on fixed examples (computed with
`classification_report(..., mode="strict", scheme=IOB2, zero_division=0)`)."""

import random

import pytest

from trainer.tasks.tagging import metrics, tags


@pytest.mark.parametrize(
    "tag, parsed",
    [
        ("O", ("O", "")),
        ("B-PER", ("B", "PER")),
        ("I-creative-work", ("I", "creative-work")),
        ("PER", None),
        ("S-PER", None),
        ("B_PER", None),
        ("B-", None),
        ("b-PER", None),
    ],
)
def test_a_tag_is_o_or_b_or_i_and_a_type(tag, parsed):
    assert tags.parse(tag) == parsed


def test_entities_follow_seqevals_strict_rules():
    # seqeval: Entities([seq], IOB2).entities == [(0, LOC, 3, 4), (0, PER, 5, 6), (0, PER, 6, 8)]
    sequence = ["I-PER", "I-PER", "O", "B-LOC", "I-ORG", "B-PER", "B-PER", "I-PER"]
    assert tags.entities(sequence) == [("LOC", 3, 4), ("PER", 5, 6), ("PER", 6, 8)]


def test_an_entity_at_the_end_of_a_sentence_is_closed():
    assert tags.entities(["O", "B-ORG", "I-ORG"]) == [("ORG", 1, 3)]


def test_an_i_tag_that_continues_nothing_is_repaired_into_a_b_tag():
    sequence = ["I-PER", "I-PER", "O", "B-LOC", "I-ORG"]
    assert tags.broken(sequence) == [0, 4]
    assert tags.repaired(sequence) == ["B-PER", "I-PER", "O", "B-LOC", "B-ORG"]


def test_a_model_predicts_o_then_b_and_i_of_each_type():
    assert tags.tag_names(["LOC", "PER"]) == ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]


def test_entity_scores_match_seqeval_on_a_fixed_example():
    gold = [["B-PER", "I-PER", "O", "B-LOC", "O"], ["B-ORG", "I-ORG", "I-ORG", "O", "B-PER"], ["O", "B-MISC", "I-MISC"]]
    predicted = [
        ["B-PER", "I-PER", "O", "B-ORG", "O"],
        ["B-ORG", "I-ORG", "O", "O", "I-PER"],
        ["O", "B-MISC", "I-MISC"],
    ]
    scores = metrics.entity_scores(gold, predicted)
    assert (scores["precision"], scores["recall"], scores["support"]) == (0.5, 0.4, 5)
    assert scores["f1"] == pytest.approx(0.444444, abs=1e-6)
    assert scores["per_type"]["PER"] == pytest.approx(
        {"precision": 1.0, "recall": 0.5, "f1": 0.666667, "support": 2}, abs=1e-6
    )
    assert scores["per_type"]["ORG"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}


def test_entity_scores_match_seqeval_on_300_random_sentences():
    kinds = ["O", "O", "O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]
    rng = random.Random(1)
    gold = [[rng.choice(kinds) for _ in range(rng.randint(1, 12))] for _ in range(300)]
    predicted = [
        [
            tag if random.Random(i * 31 + j).random() < 0.7 else random.Random(i * 17 + j).choice(kinds)
            for j, tag in enumerate(sentence)
        ]
        for i, sentence in enumerate(gold)
    ]
    scores = metrics.entity_scores(gold, predicted)
    assert (scores["precision"], scores["recall"], scores["f1"]) == pytest.approx(
        (0.699491, 0.70669, 0.703072), abs=1e-6
    )
    assert {kind: s["f1"] for kind, s in scores["per_type"].items()} == pytest.approx(
        {"LOC": 0.722222, "ORG": 0.652406, "PER": 0.731343}, abs=1e-6
    )
    assert {kind: s["support"] for kind, s in scores["per_type"].items()} == {"LOC": 201, "ORG": 180, "PER": 202}


def test_no_predicted_entity_scores_zero_not_an_error():
    scores = metrics.entity_scores([["B-PER"]], [["O"]])
    assert (scores["precision"], scores["recall"], scores["f1"]) == (0.0, 0.0, 0.0)
