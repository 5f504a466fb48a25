"""The unit of a bi-encoder's rows: a pair of texts, each encoded alone by the same sentence
encoder (model.py), or a single text (the kind's variant of labelled texts: Task.sides). Its
rows are read as texts' are (data/splits.py: the pair's columns found by name or flag, a score,
the texts themselves or a class as the label); they are tokenized with each text packed alone
(data.input_pipeline.LongTexts.sides); its export, serving/export.py's ServingModule around the
sentence encoder, takes one text and returns its vector."""

import dataclasses
import logging

from trainer.errors import UserError
from trainer.tasks.units import Tokens
from trainer.tasks.units.texts import Texts

log = logging.getLogger("trainer")


class Sides(Texts):
    noun = "pairs"

    def load(self, config, task):
        datasets = super().load(config, task)
        if datasets.text_pair_column is None and task.sides == 2:
            raise UserError(
                f"{config.data.training_file}: --task embedding trains on pairs of texts and found "
                f"one text column ({datasets.text_column!r}); name the second with --text-pair-column "
                "(or name the columns sentence1 and sentence2), or give single texts a class column "
                "to train on labelled texts"
            )
        if datasets.text_pair_column is not None and task.sides == 1:
            raise UserError(
                f"{config.data.training_file}: --loss {config.train.loss} trains on single texts with a "
                f"class, and found a pair of text columns ({datasets.text_column!r}, "
                f"{datasets.text_pair_column!r})"
            )
        return datasets

    def reads(self, pooling: str) -> str:
        return f"{pooling} pooling, each text of a pair encoded alone"

    def tokenize(self, config, datasets, preprocessor, long_texts, cache_root: str, build: bool, teacher_validation):
        """Every split into the token cache, each text of a pair packed alone: a row is its two
        texts' tokens (three with a hard negative) one after the other, each cut at
        --max-seq-length (or read in windows: --long-texts windows) on its own."""
        from trainer.data import token_cache, transfer

        packing = dataclasses.replace(long_texts, sides=len(datasets.text_columns()))
        limit = config.data.max_seq_length
        tokenized = token_cache.load_or_build(
            datasets,
            preprocessor,
            cache_root,
            limit,
            log_every_seconds=config.runtime.log_every_seconds,
            build=build,
            long_texts=packing,
        )
        training, _ = transfer.split_off_unlabeled(tokenized)  # --unlabeled-file's, a teacher's
        truncated = {name: int((split.full_lengths > limit).sum()) for name, split in tokenized.items()}
        train = tokenized["train"]
        row = ("text", "pair", "triplet")[packing.sides - 1]
        log.info(
            "%d %ss, mean %.1f tokens a %s", sum(len(t) for t in tokenized.values()), row, train.lengths.mean(), row
        )
        if packing.mode == "windows":  # a row counted by its longest text, as texts are
            from trainer.data import input_pipeline
            from trainer.data import long_texts as long_texts_lib

            sizes, specials = {n: len(t) for n, t in tokenized.items()}, input_pipeline.special_count(preprocessor, 1)
            long_texts_lib.log_cut(truncated, sizes, limit, packing, tokenized, int(specials))
        elif any(truncated.values()):
            log.warning(
                "%ss with a text longer than --max-seq-length %d tokens, that text cut to it: %s",
                row,
                limit,
                ", ".join(f"{name} {count:,} of {len(tokenized[name]):,}" for name, count in truncated.items()),
            )
        return Tokens(tokenized, training, truncated, teacher_validation, packing=packing)

    def model(self, network, units: int, config, pooling: str, task, windows):
        from trainer.modeling import heads
        from trainer.tasks.embedding import model

        encoder = heads.build_sentence_encoder(network, pooling, windows)
        width = encoder.output_shape[-1]
        if task.dims and task.dims[0] > width:
            raise UserError(f"--embedding-dims: {task.dims[0]} is more than the encoder's {width}-wide vectors")
        task.distillation.check_width(task.dims[0] if task.dims else width)
        # A pair's hard negative (--negative-column) is one more side of its row.
        sides = task.sides + (config.data.negative_column is not None)
        return model.build_bi_encoder(encoder, sides, windows[0] if windows else None)

    def served(self, model):
        """The export takes one text, whatever the rows trained on: the sentence encoder."""
        from trainer.tasks.embedding.model import ENCODER

        return model.get_layer(ENCODER)

    def serving_module(self, task, preprocessor, model, label_names, max_seq_length: int, **sentence):
        from trainer.serving import export

        return export.ServingModule(
            preprocessor,
            self.served(model),
            label_names,
            max_seq_length,
            task=task,
            **{**sentence, "pair": False},
        )

    def copy_parity(self, reference, loaded, float32: dict, candidate: dict, texts, pairs, features, max_difference):
        """An ONNX copy against the float32 export on each text of the pairs alone: its
        tokenizer's ids, and its vectors (`float32`, `candidate`: [N, 2, H])."""
        import numpy as np

        from trainer.inference import loaded_model
        from trainer.serving import quantize

        sides = [list(texts)] + ([] if pairs is None else [list(pairs)])

        def both(module):  # each text's features, the first texts' then the second's
            parts = [loaded_model.tokenize(module, side) for side in sides]
            return {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}

        return quantize.parity(float32, candidate, both(reference), both(loaded), sum(sides, []), max_difference)


SIDES_UNIT = Sides()
