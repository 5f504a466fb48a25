"""The unit of text rows: a text (or a pair of texts) labelled as a whole, read from CSV, TSV or
JSON Lines columns (data/splits.py), tokenized into the token cache (--long-texts cut or read in
windows), pooled into one vector by the classifier's head, exported as serving/export.py's
ServingModule. Classification, regression and multi-label read it."""

import logging

from trainer.tasks.units import Tokens, Unit

log = logging.getLogger("trainer")


class Texts(Unit):
    noun = "texts"

    @property
    def teacher(self):
        from trainer.tasks.units import text_teacher

        return text_teacher

    def load(self, config, task):
        from trainer.data import splits

        return splits.load_datasets(config, task)

    def prepare_rows(self, args, task):
        from trainer.data import preparation

        return preparation.read_labelled(args, task)

    def reads(self, pooling: str) -> str:
        return f"{pooling} pooling"

    def tokenize(self, config, datasets, preprocessor, long_texts, cache_root: str, build: bool, teacher_validation):
        """Every split tokenized once into the token cache (or found there); the texts cut at
        --max-seq-length counted and logged."""
        import numpy as np

        from trainer.data import splits, token_cache, transfer

        weights = None
        if config.train.class_weights == "balanced":
            weights = splits.class_weights(datasets.train.labels, len(datasets.labels.names))
            log.info("class weights: %s", dict(zip(datasets.labels.names, np.round(weights, 3).tolist())))
        tokenized = token_cache.load_or_build(
            datasets,
            preprocessor,
            cache_root,
            config.data.max_seq_length,
            class_weights=weights,
            log_every_seconds=config.runtime.log_every_seconds,
            build=build,
            long_texts=long_texts,
        )
        training, unlabeled = transfer.split_off_unlabeled(tokenized)
        truncated = _log_lengths(tokenized, unlabeled, config.data.max_seq_length, long_texts, preprocessor, datasets)
        return Tokens(tokenized, training, truncated, teacher_validation)

    def model(self, network, units: int, config, pooling: str, task, windows):
        from trainer.modeling import heads

        return heads.build_classifier(network, units, pooling, config.model.dropout, task.output_layer, windows=windows)

    def serving_module(self, task, preprocessor, model, label_names, max_seq_length: int, **sentence):
        from trainer.serving import export

        return export.ServingModule(preprocessor, model, label_names, max_seq_length, task=task, **sentence)

    def int8_module(self, float32_module, flatbuffers: dict):
        from trainer.serving import tflite

        return tflite.Int8Module(float32_module, flatbuffers)

    def onnx_module(self, path: str):
        from trainer.serving.onnx import runtime

        return runtime.OnnxModule(path)

    def onnx_files(self, preprocessor, label_names, reference) -> dict:
        return {}

    def copy_parity(self, reference, loaded, float32: dict, candidate: dict, texts, pairs, features, max_difference):
        from trainer.inference import loaded_model
        from trainer.serving import quantize

        theirs = loaded_model.tokenize(loaded, texts, pairs)
        return quantize.parity(float32, candidate, features, theirs, texts, max_difference)

    def labelled_rows(self, args, task, pair: bool, data, kind):
        from trainer.serving import labelled_file

        return labelled_file.read_texts(args, task, pair, data, kind)

    def labels_of(self, rows, task, names: list) -> tuple:
        from trainer.data import splits
        from trainer.data.labels import LabelSpec

        kind = rows.label_kind or splits.label_spec(rows.frame, rows.label_column, rows.data, task).kind
        spec = LabelSpec(kind, names, rows.data.label_separator)
        return splits.encode(rows.frame, rows.label_columns, spec, "evaluation", task), None


def _log_lengths(tokenized: dict, unlabeled, limit: int, long_texts, preprocessor, datasets) -> dict:
    """The log's line on the texts' lengths and the one on those past --max-seq-length; returns
    {split: texts longer than it} (metrics.json's truncated_texts)."""
    from trainer.data import input_pipeline
    from trainer.data import long_texts as long_texts_lib

    truncated = long_texts_lib.cut_counts(tokenized, limit)
    log.info(
        "%d texts%s, mean %.1f tokens (%.1f %s)",
        sum(len(t) for t in tokenized.values()),
        f" and {len(unlabeled)} unlabeled" if unlabeled else "",
        tokenized["train"].lengths.mean(),
        tokenized["train"].full_lengths.mean(),
        (
            "in the texts, their windows overlapping"
            if long_texts.mode == "windows"
            else "before the --max-seq-length cut"
        ),
    )
    long_texts_lib.log_cut(
        truncated,
        {name: len(t) for name, t in tokenized.items()},
        limit,
        long_texts,
        tokenized,
        int(input_pipeline.special_count(preprocessor, 1)),
        pairs=datasets.text_pair_column is not None,
    )
    return truncated


TEXTS = Texts()
