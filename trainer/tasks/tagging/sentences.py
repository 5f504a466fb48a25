"""The unit of tagged sentences: a sentence labelled word by word, read from CoNLL, IOB or JSON
Lines files (files.py, splits.py), tokenized word by word with each word's tag on its first
piece (tokens.py), a tag per token from the encoder's sequence output, exported to take raw
text and return entities with character offsets (export.py; its int8 copy int8.py, its ONNX
copy onnx_copy.py). Token classification reads it."""

import logging

from trainer.tasks.units import Tokens, Unit

log = logging.getLogger("trainer")


class TaggedSentences(Unit):
    noun = "sentences"

    @property
    def onnx_sidecars(self) -> tuple:
        from trainer.tasks.tagging import onnx_copy

        return (onnx_copy.TAGGING,)

    @property
    def formats(self) -> str:
        from trainer.tasks.tagging import files

        return f"tagged sentences: {files.FORMATS_HELP}"

    @property
    def teacher(self):
        from trainer.tasks.tagging import teacher

        return teacher

    def load(self, config, task):
        from trainer.tasks.tagging import splits

        return splits.load(config, task)

    def prepare_rows(self, args, task):
        from trainer.data.preparation import Labelled
        from trainer.tasks.tagging import prepare

        spec, labels, keys, extension, render = prepare.read(args)
        return Labelled(spec, labels, keys, extension, "sentence", render)

    def reads(self, pooling: str) -> str:
        return "tags read at each word's first piece, no pooling"

    def tokenize(self, config, datasets, preprocessor, long_texts, cache_root: str, build: bool, teacher_validation):
        """Tagged sentences tokenized word by word (tokens.py), in memory, not cached; the words
        past --max-seq-length counted. Distillation: the unlabeled sentences are trained on beside
        the training ones, and the teacher's validation values aligned to tokens as the tags are."""
        from trainer.data import transfer
        from trainer.tasks.tagging import tokens

        limit, every = config.data.max_seq_length, config.runtime.log_every_seconds
        tokenized, lost = tokens.tokenize_splits(datasets, preprocessor, limit, every)
        training = None
        if datasets.unlabeled is not None:
            unlabeled, _, _ = tokens.tokenize_split(datasets.unlabeled, preprocessor, limit, every)
            training = transfer.TransferSplit((tokenized["train"], unlabeled))
        if teacher_validation is not None:
            teacher_validation = tokens.aligned_teacher(
                datasets.validation, teacher_validation, preprocessor, limit, every
            )
        log.info(
            "%d sentences%s, mean %.1f tokens",
            sum(len(t) for t in tokenized.values()),
            f" and {len(datasets.unlabeled)} unlabeled" if training else "",
            tokenized["train"].lengths.mean(),
        )
        tokens.log_lost(lost, datasets, limit)
        # metrics.json's truncated_texts: the sentences that lost a word past the limit.
        truncated = {name: int((cut > 0).sum()) for name, (cut, _) in lost.items()}
        return Tokens(tokenized, training, truncated, teacher_validation)

    def model(self, network, units: int, config, pooling: str, task, windows):
        from trainer.modeling import heads

        return heads.build_tagger(network, units, config.model.dropout, config.data.max_seq_length)

    def serving_module(self, task, preprocessor, model, label_names, max_seq_length: int, **sentence):
        """export.TaggingModule (words in, entities out), which takes none of the sentence
        settings (the task refuses the flags behind them)."""
        from trainer.tasks.tagging import export

        return export.TaggingModule(preprocessor, model, label_names, max_seq_length)

    def int8_module(self, float32_module, flatbuffers: dict):
        from trainer.tasks.tagging import int8

        return int8.Int8TaggingModule(float32_module, flatbuffers)

    def onnx_module(self, path: str):
        from trainer.tasks.tagging import onnx_copy

        return onnx_copy.OnnxTagger(path)

    def onnx_files(self, preprocessor, label_names, reference) -> dict:
        from trainer.tasks.tagging import onnx_copy

        return {
            onnx_copy.TAGGING: onnx_copy.tagging_json(preprocessor, label_names, onnx_copy.window_overlap(reference))
        }

    def copy_parity(self, reference, loaded, float32: dict, candidate: dict, texts, pairs, features, max_difference):
        from trainer.tasks.tagging import onnx_copy

        return onnx_copy.parity(reference, loaded, float32, candidate, texts, max_difference)

    def labelled_rows(self, args, task, pair: bool, data, kind):
        import numpy as np

        from trainer.serving.labelled_file import LabelledFile
        from trainer.tasks.tagging import files

        tagged = files.read(args.input, "--input")
        texts = np.array([s.text for s in tagged.sentences], dtype=object)
        return LabelledFile(args.input, texts, None, None, tagged, "tags", [], data, None, 0)

    def labels_of(self, rows, task, names: list) -> tuple:
        from trainer.data.labels import LabelSpec
        from trainer.tasks.tagging import splits

        split = splits.tagged_split(rows.tagged, rows.path, LabelSpec("tags", names))
        return split.labels, split.sentences


SENTENCES = TaggedSentences()
