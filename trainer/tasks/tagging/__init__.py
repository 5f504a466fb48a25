"""Token classification (--task token-classification): a tag per word, entities in IOB2
(issue #52), read from files of tagged sentences (files.py) and scored by entity (metrics.py).

Each word's tag is learned and read at its first piece (keras.py; tasks/tagging/tokens.py lines
the tags up with the tokens); the export splits a raw string into words in the graph and returns
its entities with character offsets into it (spans.py, tasks/tagging/export.py).
"""

from trainer.tasks.base import Task
from trainer.tasks.tagging import card, parts
from trainer.tasks.tagging.sentences import SENTENCES

NAME = "token-classification"


class TaggingTask(Task):
    name = NAME
    unit = SENTENCES
    metric_goals = {"val_f1": "maximize", "val_precision": "maximize", "val_recall": "maximize", "val_loss": "minimize"}
    train_metric = "tag_accuracy"
    summary_metrics = ("f1", "precision", "recall", "tag_accuracy")
    loss_name = "cross-entropy per tagged word"
    label_noun = "tag"
    exported_outputs = "entities and word tags"
    export_mark = "entity_label"
    # The untagged_* and word_text outputs are an export's since issue #64 (an older one's
    # answers have no `words`).
    answer_outputs = (
        "entity_text",
        "entity_label",
        "entity_start",
        "entity_end",
        "entity_score",
        "entity_count",
        "word_tags",
        "word_count",
        "word_text",
        "word_start",
        "word_end",
        "untagged_text",
        "untagged_start",
        "untagged_end",
        "untagged_count",
    )
    agreement_metric = "f1"
    figures = ("entity_types", "entity_confusion")
    error_columns = ["split", "rank", "wrong_entities", "gold_entities", "predicted_entities", "text"]
    errors_description = "sentences with the most entities missed or wrongly found"
    model_card = card.SECTIONS
    # No layer-wise decay from 512 wide, where the width rule gives 0.9 (the lowest of 12 layers
    # at 0.28 of the rate). With it all-mpnet-base-v2 tagged no entity of WNUT-17's for two
    # epochs and ended 6.29 points below transformers; without it, 0.6458 against 0.5941, 1.12
    # below, and WikiANN scored the same (0.8413 against 0.8427): one run each, bench/ner.py
    # (docs/benchmarks.md, "Layer decay for taggers"). The narrower default encoder keeps its 0.8
    # (level with transformers on WikiANN, ahead on WNUT-17).
    undecayed_width = 512

    def __init__(self):
        self.distillation = parts.TagDistillation(self)

    @classmethod
    def claims(cls, training_file: str) -> bool:
        """--task auto: tagged sentences are this kind's (files.holds_tagged_sentences)."""
        from trainer.tasks.tagging import files

        return files.holds_tagged_sentences(training_file, cls.name)

    def check_flags(self, config, require) -> None:
        d, m, t = config.data, config.model, config.train
        why = f"has no meaning with --task {NAME}"
        for value, flag, reason in (
            (d.text_pair_column, "--text-pair-column", "(a sentence is tagged on its own)"),
            (d.label_column, "--label-column", "(the tags are in the tagged file)"),
            (d.label_names, "--label-names", "(the tags name their types)"),
            (d.label_type != "auto", "--label-type", "(tags are IOB2)"),
            (
                d.long_texts != "truncate",
                "--long-texts",
                "(training cuts a sentence at --max-seq-length and counts it; the export reads every word, in windows)",
            ),
            (t.class_weights != "none", "--class-weights", "(a row has a tag per word)"),
            (
                m.encoder_backend == "hub",
                "--encoder-backend",
                "'hub' (a TF-Hub preprocessor cannot tokenize word by word)",
            ),
        ):
            require(not value, flag, f"{why} {reason}")
        super().check_flags(config, require)

    # --- labels: read and encoded with the sentences (tasks/tagging/splits.py)
    def label_counts(self, labels, spec) -> dict:
        """{entity type: entities} of a split's tag ids [N, W]."""
        from trainer.tasks.tagging import numbers

        return numbers.entity_counts(labels, spec.names)

    def describe_labels(self, spec) -> str:
        return f"IOB2 tags of {', '.join(spec.names[1::2]).replace('B-', '')}"

    def label_summary(self, labels, spec) -> str:
        """A split's entities per type (trainer.prepare's line per file)."""
        counts = self.label_counts(labels, spec)
        return "entities " + ", ".join(f"{kind} {count}" for kind, count in counts.items()) if counts else "no entity"

    def prepare_strata(self, labels, minimum):
        """Each sentence's rarest entity type, as multi-label's rows their rarest label (tag
        ids [N, W]: B- of the k-th type is 2k + 1), so every split gets its share of each."""
        import numpy as np

        from trainer.tasks.multilabel.labels import rarest_labels

        begins = range(1, int(labels.max(initial=0)) + 1, 2)
        carried = np.stack([(labels == b).any(axis=1) for b in begins], axis=1)
        return rarest_labels(carried.astype(np.float32), minimum)

    # --- the model
    def output_units(self, labels) -> int:
        return len(labels.names)

    def loss(self):
        from trainer.tasks.tagging.keras import TagLoss

        return TagLoss()

    def keras_metrics(self) -> list:
        from trainer.tasks.tagging.keras import TagAccuracy

        return [TagAccuracy(name="tag_accuracy")]

    def summarize(self, outputs, labels, label_names) -> dict:
        from trainer.tasks.tagging import numbers

        return numbers.summarize(outputs, labels, label_names)

    def describe(self, result: dict) -> str:
        return (
            f"loss {result['loss']:.4f}  entity F1 {result['f1']:.4f}  precision "
            f"{result['precision']:.4f}  recall {result['recall']:.4f}  tag "
            f"accuracy {result['tag_accuracy']:.4f}"
        )

    def describe_epoch(self, logs: dict) -> str:
        return (
            f"loss {logs['loss']:.4f} tag acc {logs['tag_accuracy']:.3f} | val loss "
            f"{logs['val_loss']:.4f} entity F1 {logs['val_f1']:.3f} precision "
            f"{logs['val_precision']:.3f} recall {logs['val_recall']:.3f}"
        )

    # --- a loaded export's answers (its export: tasks/tagging/export.py)
    def predicted_columns(self, outputs) -> dict:
        """`entities` ([{text, label, start, end, score}]), `words` ([{text, start, end, tag}],
        every word, tag None where it has none) and `tags` (the words' tags) per text: lists,
        nested in JSON Lines and written as JSON in a CSV or TSV cell. An export from before
        words were returned gives no `words`."""
        from trainer.tasks.tagging import numbers

        words = numbers.exported_words(outputs)
        given = {"words": numbers.cells(words)} if "word_text" in outputs else {}
        return {
            "entities": numbers.cells(numbers.exported_entities(outputs)),
            **given,
            "tags": numbers.cells(numbers.exported_tags(outputs, words)),
        }

    def served_predictions(self, outputs) -> list:
        """`[{"entities": [...], "words": [...], "tags": [...]}]` per text, as predicted_columns'."""
        columns = self.predicted_columns(outputs)
        return [dict(zip(columns, row)) for row in zip(*columns.values())]

    # --- the copies' check: the entities a user reads, at their character offsets
    def agreement_outputs(self) -> tuple:
        return "entity_label", "entity_start", "entity_end", "entity_count"

    def agreement_values(self, outputs: dict):
        """Each text's entities, a set of (type, start, end)."""
        from trainer.tasks.tagging import numbers

        return numbers.exported_spans(outputs)

    def agreement_labels(self, split):
        from trainer.tasks.tagging import numbers

        return numbers.gold_spans(split.sentences)

    agreement_of = "entities"

    def agreement_decisions(self, outputs):
        return outputs

    def decisions_agree(self, ours, theirs) -> float:
        """The F1 of the copy's entities against float32's, matched by type and offsets: a
        sentence holds many, and one moved word should cost one entity, not the sentence."""
        from trainer.tasks.tagging import metrics

        return metrics.span_scores(ours, theirs)["f1"]

    def agreement_value(self, outputs, labels, label_names) -> float:
        """Entity F1 of the export's entities against the gold ones, by type and offsets."""
        from trainer.tasks.tagging import metrics

        return metrics.span_scores(labels, outputs)["f1"]

    # --- the report
    def title(self, labels) -> str:
        return f"tagger of {len(labels) // 2} entity types"

    def split_predictions(self, outputs, labels, texts, pairs, temperature: float):
        from trainer.tasks.tagging import numbers

        return numbers.split_predictions(outputs, labels, texts)

    def export_names(self, exported: dict) -> list:
        """Its tags, in the order of its words' probabilities."""
        return [name.decode("utf-8") for name in exported["tag_names"][0]]

    def outputs_of_export(self, exported: dict, temperature: float, sentences=None):
        """Log probabilities of each tagged word's tags [N, W, tags], read where the export's
        own words meet the sentences' (aligned.py): the export splits the words itself, and
        "U.S." is four of its words."""
        from trainer.tasks.classification import metrics
        from trainer.tasks.tagging import aligned

        return metrics.logits_from_probabilities(aligned.word_probabilities(exported, sentences), 1.0)

    def error_measure(self, predictions, names) -> tuple:
        from trainer.tasks.tagging import numbers

        return numbers.error_measure(predictions, names)
