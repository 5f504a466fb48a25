"""Token classification's numbers of a split: the model's per-token outputs read at each word's
first piece (its labels' positions: tasks/tagging/tokens.py), as tags, scored by entity; and a
loaded export's answers as trainer.predict and trainer.serve give them."""

from collections.abc import Sequence

import numpy as np

from trainer.tasks.tagging import metrics
from trainer.tasks.tagging import tags as iob2
from trainer.tasks.tagging.tags import UNTAGGED


def word_tags(tag_ids: np.ndarray, labels: np.ndarray, names: Sequence[str]) -> list[list[str]]:
    """Each row's tags by name at its words' first pieces (where `labels` [N, S] is not -1)."""
    return [[names[i] for i in ids[row_labels != UNTAGGED]] for ids, row_labels in zip(tag_ids, labels)]


def summarize(outputs: np.ndarray, labels: np.ndarray, names: Sequence[str]) -> dict:
    """metrics.json's block of a split: logits [N, S, tags] against token-aligned tag ids [N, S]."""
    from trainer.tasks.parts.temperature import softmax_cross_entropy

    outputs = np.asarray(outputs, np.float64)
    tagged = labels != UNTAGGED
    losses = softmax_cross_entropy(outputs[tagged], labels[tagged])
    per_sentence = np.bincount(np.nonzero(tagged)[0], losses, minlength=len(labels)) / np.maximum(tagged.sum(axis=1), 1)
    predicted = outputs.argmax(axis=-1)
    gold, guessed = word_tags(labels, labels, names), word_tags(predicted, labels, names)
    scores = metrics.entity_scores(gold, guessed)
    return {
        "examples": int(len(labels)),
        "loss": float(per_sentence.mean()) if len(labels) else 0.0,
        "f1": scores["f1"],
        "precision": scores["precision"],
        "recall": scores["recall"],
        "entities": scores["support"],
        "tag_accuracy": float((predicted == labels)[tagged].mean()) if tagged.any() else 0.0,
        "per_type": scores["per_type"],
        "confusion": type_confusion(gold, guessed, names),
    }


NONE = "(none)"  # the confusion's row of entities found where none is, column of those missed


def type_confusion(gold, predicted, names: Sequence[str]) -> dict:
    """{"types": the entity types and NONE, "matrix": counts [true type][predicted type]} of the
    entities of sentences' tags, matched by their words: the same words under another type are
    confused types; an entity on words no gold one has is in NONE's row, a gold one on words no
    prediction has in NONE's column."""
    types = [*(name[2:] for name in names[1::2]), NONE]
    index = {kind: i for i, kind in enumerate(types)}
    matrix = np.zeros([len(types), len(types)], np.int64)
    for truth, guess in zip(gold, predicted):
        true_spans = {(a, b): kind for kind, a, b in iob2.entities(truth)}
        guessed = {(a, b): kind for kind, a, b in iob2.entities(guess)}
        for span in set(true_spans) | set(guessed):
            matrix[index[true_spans.get(span, NONE)], index[guessed.get(span, NONE)]] += 1
    return {"types": types, "matrix": matrix.tolist()}


def entity_counts(labels: np.ndarray, names: Sequence[str]) -> dict:
    """{entity type: entities} of tag ids [N, W] (-1 past a sentence's words)."""
    counts = {}
    for row in labels:
        for kind, _, _ in iob2.entities([names[i] for i in row if i != UNTAGGED]):
            counts[kind] = counts.get(kind, 0) + 1
    return dict(sorted(counts.items()))


def split_predictions(outputs: np.ndarray, labels: np.ndarray, texts):
    """The report's predictions of a split: `labels` and `predicted`, token-aligned tag ids."""
    from trainer.inference.split_predictions import SplitPredictions

    predicted = np.where(labels != UNTAGGED, np.asarray(outputs).argmax(axis=-1), UNTAGGED)
    return SplitPredictions(texts, labels, None, None, predicted=predicted)


def error_measure(predictions, names) -> tuple:
    """(entities missed or wrongly found per sentence, whether any was, errors.csv's columns:
    each side's entities as `TYPE words i-j`)."""
    p = predictions
    gold = [set(iob2.entities(t)) for t in word_tags(p.labels, p.labels, names)]
    found = [set(iob2.entities(t)) for t in word_tags(p.predicted, p.labels, names)]
    wrong = np.array([len(g ^ f) for g, f in zip(gold, found)], np.float64)

    def described(sets):
        return np.array(
            ["; ".join(f"{kind} words {a}-{b - 1}" for kind, a, b in sorted(one, key=lambda e: e[1])) for one in sets],
            dtype=object,
        )

    return (
        wrong,
        wrong > 0,
        {
            "wrong_entities": wrong.astype(np.int64),
            "gold_entities": described(gold),
            "predicted_entities": described(found),
        },
    )


def _text(value) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def exported_entities(outputs: dict) -> list:
    """Each text's entities, [{text, label, start, end, score}], of a loaded export's outputs."""
    rows = []
    for row, count in enumerate(np.asarray(outputs["entity_count"])):
        rows.append(
            [
                {
                    "text": _text(outputs["entity_text"][row][i]),
                    "label": _text(outputs["entity_label"][row][i]),
                    "start": int(outputs["entity_start"][row][i]),
                    "end": int(outputs["entity_end"][row][i]),
                    "score": float(outputs["entity_score"][row][i]),
                }
                for i in range(int(count))
            ]
        )
    return rows


def exported_spans(outputs: dict) -> np.ndarray:
    """Each text's entities as a set of (type, start, end), of a loaded export's outputs."""
    return cells(
        [
            frozenset(
                (
                    _text(outputs["entity_label"][row][i]),
                    int(outputs["entity_start"][row][i]),
                    int(outputs["entity_end"][row][i]),
                )
                for i in range(int(count))
            )
            for row, count in enumerate(np.asarray(outputs["entity_count"]))
        ]
    )


def gold_spans(sentences) -> np.ndarray:
    """Each sentence's (files.Sentence) tagged entities as a set of (type, start, end) character
    offsets into its text, as exported_spans reads an export's."""
    return cells(
        [
            frozenset((kind, s.words[first][0], s.words[end - 1][1]) for kind, first, end in iob2.entities(s.tags))
            for s in sentences
        ]
    )


def exported_words(outputs: dict) -> list:
    """Each text's words in text order, [{text, start, end, tag}], of a loaded export's
    outputs: every word it split, one it gave no tag (no piece: a lone zero-width joiner) with
    tag None; None for an export from before words were returned (it has no `word_text`)."""
    if "word_text" not in outputs:
        return [None] * len(outputs["word_count"])
    rows = []
    for row, (tagged, untagged) in enumerate(zip(outputs["word_count"], outputs["untagged_count"])):
        words = [
            {
                "text": _text(outputs["word_text"][row][i]),
                "start": int(outputs["word_start"][row][i]),
                "end": int(outputs["word_end"][row][i]),
                "tag": _text(outputs["word_tags"][row][i]),
            }
            for i in range(int(tagged))
        ]
        words += [
            {
                "text": _text(outputs["untagged_text"][row][i]),
                "start": int(outputs["untagged_start"][row][i]),
                "end": int(outputs["untagged_end"][row][i]),
                "tag": None,
            }
            for i in range(int(untagged))
        ]
        rows.append(sorted(words, key=lambda word: word["start"]))
    return rows


def exported_tags(outputs: dict, words: list) -> list:
    """Each text's tags: its `words`' (exported_words), or of an export from before words were
    returned, the tags of the words it tagged."""
    return [
        [word["tag"] for word in row]
        if row is not None
        else [_text(tag) for tag in outputs["word_tags"][index][: int(outputs["word_count"][index])]]
        for index, row in enumerate(words)
    ]


def cells(rows: list) -> np.ndarray:
    """An object array holding each row's list whole (a frame column of lists)."""
    out = np.empty(len(rows), dtype=object)
    for index, row in enumerate(rows):
        out[index] = row
    return out


def teacher_problem(values):
    """(sentence, why) of the first sentence of a teacher's values [N, W, C] (NaN past its words,
    a word the teacher gave no probabilities all 0) with a word's probabilities outside [0, 1]
    or not summing to 1 (within 0.01, a file's rounding); None when every word's are fine."""
    values = np.asarray(values, np.float64)
    words = ~np.isnan(values[..., 0])
    given = words & (np.abs(values).sum(axis=-1) > 0)
    total = np.nan_to_num(values).sum(axis=-1)
    outside = words & (
        (np.nan_to_num(values) < 0)
        | (np.nan_to_num(values) > 1)
        | ~np.isfinite(np.where(words[..., None], values, 0.0))
    ).any(axis=-1)
    bad = outside | (given & (np.abs(total - 1) > 0.01))
    if not bad.any():
        return None
    row, word = (int(i) for i in np.argwhere(bad)[0])
    if outside[row, word]:
        return row, f"token {word + 1}'s probabilities are not all in [0, 1]"
    return row, f"token {word + 1}'s probabilities sum to {total[row, word]:g}, not 1"


def teacher_agreement(teacher, outputs):
    """The share of the words the teacher gave probabilities (token-aligned [N, S, C], 0 on
    other tokens) whose most probable tag the model's outputs [N, S, C] choose too; None when
    it gave none."""
    teacher = np.asarray(teacher)
    taught = teacher.sum(axis=-1) > 0
    if not taught.any():
        return None
    return float(np.mean(teacher.argmax(axis=-1)[taught] == np.asarray(outputs).argmax(axis=-1)[taught]))
