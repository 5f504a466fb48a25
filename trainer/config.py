"""One typed config, built once from flags and the environment, validated up front, saved with the run.

Each dataclass field *is* a command-line flag: `--max-seq-length` is `DataConfig.max_seq_length`,
with its help text in the field's metadata. The parser, `--help`, config.json and the tuning
parameter ids of `trainer.submit` therefore cannot drift apart.
"""

import argparse
import dataclasses
import datetime
import difflib
import json
import os
import re
import typing
from collections.abc import Mapping, Sequence

from trainer import cli, storage, task_registry
from trainer.errors import UserError
from trainer.vertex import environment as vertex

DEFAULT_ENCODER = "minilm-l6-h384-uncased"
ENCODER_BACKENDS = ("native", "hub")


def validation_metric(name: str) -> str:
    """'spearman' means 'val_spearman': the metrics are all validation metrics."""
    return name if name.startswith("val_") else f"val_{name}"


# Epochs when --epochs is not given, by the size of the training split: (fewer examples than,
# epochs), else EPOCHS_OTHERWISE. Small sets need more passes, and the best epoch's weights are
# exported, so the extra ones cost time, not accuracy (bench/recipe.py).
EPOCHS_BY_SIZE = ((5_000, 6), (20_000, 4))
EPOCHS_OTHERWISE = 3
# Peak learning rate when --learning-rate is not given, by the encoder's hidden size: (narrower
# than, rate), else LEARNING_RATE_OTHERWISE. 3e-4: the best rate bench/recipe.py tried with
# --layer-decay 0.8 on the 384-wide default encoder; 1e-4 and 5e-5: ELECTRA's fine-tuning rates
# for Base and Large (google-research/electra configure_finetuning.py).
LEARNING_RATE_BY_WIDTH = ((512, 3e-4), (1024, 1e-4))
LEARNING_RATE_OTHERWISE = 5e-5
# Layer-wise learning-rate decay when --layer-decay is not given, by the encoder's width alike:
# 0.8 below 512 (the default encoder's best, bench/recipe.py; ELECTRA-Small's own), else 0.9
# (all-mpnet-base-v2's better one over 3 MRPC seeds, bench/recipe.py; ELECTRA-Large's own). With
# 12 layers and more, 0.8 leaves the lowest layers at under a tenth of the peak rate.
LAYER_DECAY_BY_WIDTH = ((512, 0.8),)
LAYER_DECAY_OTHERWISE = 0.9


def _by_width_help(table, otherwise: float) -> str:
    """A by-width default's rule as --help states it: "3e-04 below 512, ..., else 5e-05."."""
    return ", ".join(f"{value:g} below {width}" for width, value in table) + f", else {otherwise:g}."


def _flag(default, help, **kwargs):
    """A config field and its flag. What comes from the task kinds (--task's choices, the metrics,
    their default) is a function, called when the parser or a Config is built: the kinds register
    after this module is imported (trainer/task_registry.py)."""
    if callable(default):
        return dataclasses.field(default_factory=default, metadata={"help": help, **kwargs})
    return dataclasses.field(default=default, metadata={"help": help, **kwargs})


def _resolved(value):
    return value() if callable(value) else value


@dataclasses.dataclass
class DataConfig:
    training_file: str | None = _flag(
        None,
        "Training data: a table of texts and labels, CSV, TSV, JSON Lines or a JSON array "
        "(by extension: .csv, .tsv, .jsonl or .ndjson, .json); or tagged sentences, which "
        "--task auto trains token classification on: CoNLL (.conll or .iob; a .txt or .tsv "
        "of CoNLL lines with --task token-classification) or JSON Lines of tokens and "
        "tags, or of text and spans (docs/data.md). Optionally .gz; local or gs://; "
        "several files comma-separated or as a glob. Default: the sample posts shipped in "
        "the package.",
    )
    validation_file: str | None = _flag(
        None,
        "Validation data, in the training file's kind of file. Default: a "
        "--validation-fraction of the training data (stratified by label; tagged "
        "sentences drawn at random).",
    )
    testing_file: str | None = _flag(None, "Test data, evaluated once with the best weights.")
    text_column: str | None = _flag(
        None,
        "Column holding the text of a table (tagged sentences are read by their format). "
        "Default: the first of bodyText, text, sentence, tweet, review, content that exists.",
    )
    label_column: str | None = _flag(
        None,
        "Column holding the label of a table (a tagged file holds its tags). Default: the "
        "first of sentiment, label, labels, target, class, category that exists.",
    )
    label_names: str | None = _flag(
        None,
        "Comma-separated class names. For integer labels: the name of 0, 1, ...; for "
        "sentiment scores: the negative,neutral,positive names; for string labels: the "
        "classes and their order (rows with other labels are errors).",
    )
    label_type: str = _flag(
        "auto",
        "How to read the label column: 'score' maps a float in [-1, 1] to negative (<0), "
        "neutral (0), positive (>0); 'index' is an integer class id; 'name' is a class "
        "name. 'auto' decides from the training file's values: mostly words are names; "
        "integers that run 0..K-1 (or that --label-names names) are class ids, other "
        "integers (star ratings 1-5) names, so that no class is without rows; other "
        "numbers are scores. The log says which it chose.",
        choices=("auto", "score", "index", "name"),
    )
    train_fraction: float = _flag(
        1.0, "Train on this fraction of the training data (stratified by label; tagged sentences at random), in (0, 1]."
    )
    validation_fraction: float = _flag(
        0.1, "Fraction of the training data held out for validation when no --validation-file is given (stratified)."
    )
    max_seq_length: int = _flag(128, "Maximum tokens per text, [CLS] and [SEP] included.")
    long_texts: str = _flag(
        "truncate",
        "What becomes of a text longer than --max-seq-length, at training, prediction "
        "and serving alike: 'truncate' keeps its first tokens; 'head-tail' its first "
        "quarter and last three quarters of them (Sun et al. 2019: the end of a "
        "review often holds its verdict); 'windows' all of them, in windows of "
        "--max-seq-length overlapping by --window-overlap tokens, at most "
        "--max-windows, pooled by --window-pooling into one vector per text. A "
        "pair's texts share the limit longest first (as truncation shares it), each "
        "keeping its first or, with head-tail, its first and last tokens; windows "
        "read single texts only (--task embedding: each text of a pair in windows of its own).",
        choices=("truncate", "head-tail", "windows"),
    )
    window_overlap: int | None = _flag(
        None,
        "--long-texts windows: tokens each window shares with the one before it (Hugging "
        "Face calls this `stride`), so a sentence cut by one window's end is whole in the "
        "next. Default: a quarter of --max-seq-length (32 at 128).",
    )
    max_windows: int = _flag(
        8,
        "--long-texts windows: windows per text at most; a longer text loses its end past "
        "them (the log counts those texts). Caps the memory a very long text takes.",
    )
    skip_empty_text: bool = _flag(
        False, "Skip rows whose text is empty or missing (counted in metrics.json) instead of stopping with an error."
    )
    min_examples_per_class: int = _flag(
        5,
        "Stop when a class of the training data has fewer rows than this: such a class is "
        "usually a typo in a label (the error names its rows and the nearest known label).",
    )
    text_pair_column: str | None = _flag(
        None,
        "Column holding each row's second text, for sentence pairs (paraphrase, "
        "entailment, question/answer match): the encoder reads [CLS] text [SEP] pair [SEP]. "
        "Default: detected when the file has sentence1/sentence2, question1/question2, "
        "premise/hypothesis, text_a/text_b or anchor/positive (unless --text-column is given).",
    )
    negative_column: str | None = _flag(
        None,
        "--task embedding, pairs without a score: the column of each row's hard negative, a "
        "text close to its first text but not its pair, trained against beside the batch's "
        "other texts (sentence-transformers' triplets: anchor, positive, negative). Default: "
        "a column named negative or hard_negative, when the pairs have no score.",
    )
    label_separator: str = _flag(
        "|",
        "--task multi-label: the separator of the label names in one label cell "
        "('sports|politics'; an empty cell is a row without labels).",
    )
    label_columns: str | None = _flag(
        None, "--task multi-label: comma-separated 0/1 columns, one per label, instead of one label column of names."
    )
    delimiter: str | None = _flag(
        None,
        "The field separator of .csv files, e.g. ';' for a CSV saved by Excel in a European "
        "locale. Default: ',' (a header separated by ';' stops with a hint).",
    )
    allow_label_variants: bool = _flag(
        False,
        "Keep labels that differ only in case or Unicode normalization ('Positive' and "
        "'positive') as separate classes, instead of stopping.",
    )


@dataclasses.dataclass
class ModelConfig:
    encoder: str = _flag(
        DEFAULT_ENCODER,
        "Encoder: a registered name (docs/encoders.md), hf:ORG/NAME[@REVISION] "
        "(a Hugging Face Hub repository of a native family, docs/encoders.md, "
        "at a branch, tag or commit; HF_TOKEN for private or gated ones), a "
        "TF-Hub/Kaggle handle, or a "
        "local/gs:// directory (Hugging Face safetensors or tf_model.h5, "
        "original Google BERT, or TF-Hub SavedModel).",
    )
    preprocessor: str | None = _flag(
        None, "TF-Hub preprocessor handle or directory. Default: the one matching --encoder."
    )
    encoder_layers: int | None = _flag(
        None,
        "Keep this many of the encoder's layers, evenly spaced with its first and last, each "
        "starting from its pretrained weights: a shallower model that trains and predicts "
        "faster (DistilBERT's student kept every other layer of BERT's 12). Native "
        "backend. Default: all.",
    )
    encoder_backend: str = _flag(
        "native",
        "'native' rebuilds BERT-shaped encoders from Keras layers (real mixed precision "
        "and XLA); 'hub' runs the SavedModel through hub.KerasLayer (any architecture).",
        choices=ENCODER_BACKENDS,
    )
    pooling: str = _flag(
        "auto",
        "Sentence vector fed to the head: 'cls' (pooled [CLS] output) or 'mean' (masked "
        "mean of token vectors). 'auto' uses what the encoder was trained with. A "
        "tagger (--task token-classification) pools nothing: each word's tag is read "
        "at its first piece.",
        choices=("auto", "cls", "mean"),
    )
    window_pooling: str = _flag(
        "mean",
        "--long-texts windows: how a text's window vectors become one: their 'mean', "
        "their element-wise 'max', or an 'attention'-weighted sum (a learned score per "
        "window).",
        choices=("mean", "max", "attention"),
    )
    dropout: float = _flag(0.1, "Dropout rate before the output head, in [0, 1).")
    freeze_encoder: bool = _flag(False, "Train only the output head.")
    train_word_embeddings: bool = _flag(
        False,
        "Also fine-tune the word-embedding table (native backend). Off by default: it is "
        "half of a small BERT's weights and AdamW updates all of it every step, while "
        "fine-tuning it does not improve sentiment accuracy (see bench/).",
    )
    gradient_checkpointing: bool = _flag(
        False,
        "Recompute each transformer block's activations in the backward pass instead of "
        "keeping them (tf.recompute_grad): less accelerator memory for about a third more "
        "compute per step, the same loss and gradients. Native encoders whose family's "
        "blocks recompute (any other stops with an error naming those families).",
    )
    task: str = _flag(
        task_registry.AUTO,
        "What the head predicts: 'classification' (one class per text), 'regression' "
        "(one number per text: a linear output trained with MSE on standardized "
        "targets), 'multi-label' (any number of labels per text: sigmoid outputs, "
        "binary cross-entropy, per-label thresholds chosen on validation), "
        "'token-classification' (a tag per word, IOB2, scored by entity: named entities; "
        "from tagged sentences), 'embedding' (a vector per text for search and similarity: "
        "a bi-encoder trained on pairs of texts and their similarity score, CoSENT). 'auto': "
        "token-classification when the training file holds tagged sentences (a .conll or "
        ".iob file, or JSON Lines of tokens and tags, or of text and spans), else "
        "classification.",
        choices=task_registry.choices,
    )


# Distillation's defaults (bench/distill.py measured the choice; README, Distillation).
DISTILL_TEMPERATURE = 2.0
DISTILL_ALPHA = 0.5


@dataclasses.dataclass
class DistillationConfig:
    teacher: str | None = _flag(
        None,
        "A model this package exported (a --model-dir, local or gs://) that labels the "
        "training texts and --unlabeled-file's with its probabilities once, before "
        "training; the run learns from them (knowledge distillation). The file it writes "
        "(JOB_DIR/teacher/) is reused by a resumed or repeated run.",
    )
    teacher_probabilities: str | None = _flag(
        None,
        "Instead of --teacher: a file of a teacher's outputs per text (CSV, TSV, JSON Lines; "
        "local or gs://), with the text (and pair) columns and the columns trainer.predict "
        "writes: probability_<label> per class or label, predicted_score for regression, "
        "embedding (and pair_embedding) for embeddings; for a tagger, JSON Lines of each "
        "sentence's tokens and its words' tag probabilities (docs/distillation.md). How an "
        "LLM's or any other system's labels come in. Every training and unlabeled text must "
        "have a row.",
    )
    unlabeled_file: str | None = _flag(
        None,
        "Texts without labels the teacher labels for the student (files as for "
        "--training-file: globs, gz, gs://; for a tagger, JSON Lines of tokens). Texts also "
        "in the validation or test data are dropped (the log counts them). Needs --teacher "
        "or --teacher-probabilities.",
    )
    distill_temperature: float = _flag(
        DISTILL_TEMPERATURE,
        "Classification or tagging with a teacher: the temperature both the "
        "teacher's and the student's distributions are softened by in the "
        "distillation loss (Hinton et al. 2015), > 0.",
    )
    distill_alpha: float = _flag(
        DISTILL_ALPHA,
        "With a teacher: the weight of the loss on a row's true label, where it has "
        "one; 1 - alpha weighs the loss to the teacher's output. In [0, 1].",
    )

    @property
    def teacher_source(self) -> str | None:
        """--teacher or --teacher-probabilities, whichever is given."""
        return self.teacher or self.teacher_probabilities


@dataclasses.dataclass
class TrainConfig:
    epochs: int | None = _flag(
        None,
        "Passes over the training data. Default: by the number of training examples: "
        + ", ".join(f"{epochs} below {size:,}" for size, epochs in EPOCHS_BY_SIZE)
        + f", else {EPOCHS_OTHERWISE} (the best epoch's weights are exported).",
    )
    max_steps: int = _flag(
        0,
        "Train for exactly this many steps (optimizer updates), overriding --epochs: the run "
        "takes the epochs that needs, the last one stopping at that step (evaluated and "
        "checkpointed like any other), and the learning rate decays to zero there. 0: "
        "--epochs decides.",
    )
    eval_every_steps: int = _flag(
        0,
        "Evaluate on validation, and checkpoint, every this many training steps instead of "
        "after each epoch: eval_history.csv gets a row per evaluation, and the best weights, "
        "early stopping (its patience counted in evaluations) and resuming work at that "
        "granularity (0: once per epoch).",
    )
    batch_size: int = _flag(32, "Global batch size (split across replicas).")
    embedding_dims: str | None = _flag(
        None,
        "--task embedding: also train the vector's leading dimensions to work alone "
        "(Matryoshka; sentence-transformers' MatryoshkaLoss), comma-separated from the largest, "
        "e.g. 384,256,128,64: the loss is the mean of the task's loss on each. metrics.json "
        "scores each (its splits' `dims`), and the export also returns each as "
        "embedding_<d>, unit length.",
    )
    loss: str = _flag(
        task_registry.AUTO,
        "The training objective. auto: the task's own; --task embedding's is decided by the "
        "training file: cosent (CoSENT) for pairs with a score column, multiple-negatives "
        "(each pair's second text against the batch's others, as sentence-transformers' "
        "MultipleNegativesRankingLoss) for pairs without one, supervised-contrastive (texts of "
        "a class nearer each other than the rest) for single texts with a class column.",
        choices=task_registry.losses,
    )
    gradient_accumulation_steps: int = _flag(
        1,
        "Sum the gradients of this many batches before each optimizer step: an effective "
        "batch of this times --batch-size, in the memory of one batch. Exactly one step on "
        "the concatenated batches (the loss is weighted by rows), in every precision and "
        "under every strategy. Steps (--max-steps, --eval-every-steps, the schedule) count "
        "optimizer steps.",
    )
    eval_batch_size: int = _flag(64, "Global batch size for evaluation and prediction.")
    learning_rate: float | None = _flag(
        None,
        "Peak learning rate of AdamW. Default: by the encoder's hidden size: "
        + _by_width_help(LEARNING_RATE_BY_WIDTH, LEARNING_RATE_OTHERWISE),
    )
    warmup_fraction: float = _flag(0.1, "Fraction of training steps with linear warm-up, then linear decay to zero.")
    weight_decay: float = _flag(0.01, "Decoupled weight decay (AdamW); never applied to LayerNorm or biases.")
    layer_decay: float | None = _flag(
        None,
        "Layer-wise learning-rate decay, in (0, 1]: the top transformer layer trains at this "
        "times --learning-rate, each layer below at this times the one above, the embeddings "
        "lowest; the pooler and head at the full rate (1.0: one rate for all). Default: by "
        "the encoder's hidden size: " + _by_width_help(LAYER_DECAY_BY_WIDTH, LAYER_DECAY_OTHERWISE),
        help_after=lambda: "".join(
            f" --task {kind.name}: 1 from {kind.undecayed_width}."
            for kind in task_registry.kinds()
            if kind.undecayed_width is not None
        ),
    )
    clip_norm: float = _flag(1.0, "Clip gradients to this global norm (0 disables).")
    early_stopping_patience: int = _flag(
        0,
        "Stop after this many epochs without a better --selection-metric on validation "
        "(0 disables). The best epoch's weights are exported either way.",
    )
    class_weights: str = _flag(
        "none",
        "'balanced' weights the loss by inverse class frequency (classes of texts).",
        choices=("none", "balanced"),
    )
    seed: int = _flag(42, "Seed for splits, shuffling, initialisation and dropout.")
    dry_run: bool = _flag(
        False,
        "One step of training, evaluation and export on a few rows, to check a job end "
        "to end in about a minute (most of it TensorFlow's start-up and tracing).",
    )
    selection_metric: str = _flag(
        task_registry.default_metric,
        "Validation metric that picks the best epoch (whose weights are "
        "exported), drives early stopping and is reported to Vertex "
        "hyperparameter tuning.",
        choices=lambda: tuple(task_registry.metric_goals()),
        aliases=("--hypertune-metric",),
        type=validation_metric,
    )
    find_label_issues: bool = _flag(
        False,
        "Classification and multi-label: also rank the training rows whose labels look "
        "wrong (label_issues.csv, report.html), from out-of-sample probabilities of "
        "--label-issue-folds cross-fitted models: that many extra trainings on the "
        "training split. Validation rows are always ranked.",
    )
    label_issue_folds: int = _flag(
        4, "--find-label-issues: folds of the training split, each scored by a model trained on the others."
    )


@dataclasses.dataclass
class RuntimeConfig:
    distribution: str = _flag(
        "auto",
        "tf.distribute strategy. 'auto': a TPU if attached, else multi-worker when "
        "TF_CONFIG names several tasks, else mirrored over 2+ GPUs, else one device.",
        choices=("auto", "none", "mirrored", "multiworker", "tpu"),
    )
    mixed_precision: str = _flag(
        "auto",
        "Compute dtype. 'auto': float16 on GPUs with compute capability >= 7.0, "
        "bfloat16 on TPUs and on CPUs with native bfloat16 (AVX512_BF16/AMX), else off.",
        choices=("auto", "off", "float16", "bfloat16"),
    )
    jit_compile: str = _flag(
        "auto",
        "XLA. 'auto': on for the native encoder on GPU/TPU, off on CPU (slower there) "
        "and never for a trained hub.KerasLayer (it recompiles every step).",
        choices=("auto", "on", "off"),
    )
    sequence_padding: str = _flag(
        "auto",
        "'bucket' groups texts of similar length and pads each batch to one of a few "
        "fixed lengths; 'fixed' pads everything to --max-seq-length. 'auto': fixed "
        "with static shapes, bucket otherwise.",
        choices=("auto", "bucket", "fixed"),
    )
    static_shapes: str = _flag(
        "auto",
        "The input path a TPU needs: every text padded to --max-seq-length, only full "
        "training batches (an epoch's last partial batch is skipped; each epoch "
        "shuffles anew) and a last evaluation batch filled with weight-0 rows that "
        "metrics ignore. 'auto': on for TPU only; 'on' runs that path on CPU/GPU too, "
        "e.g. to check a TPU job there.",
        choices=("auto", "on", "off"),
    )
    steps_per_execution: int = _flag(1, "Training steps per tf.function call (TPU throughput).")
    log_every_seconds: float = _flag(30.0, "Seconds between progress lines.")
    log_every_steps: int = _flag(
        10,
        "Every this many training steps, TensorBoard scalars of the loss, learning rate and "
        "throughput (run `steps`), so that even a one-epoch run draws a curve (0: none).",
    )
    verbose: bool = _flag(False, "Also show TensorFlow's own log lines and Python warnings (hidden by default).")
    export_precision: str = _flag(
        "float32",
        "Compute dtype of the exported model. 'float32': always, whatever "
        "--mixed-precision trained it (serves on any CPU); 'training': keep the "
        "training precision (bfloat16/float16 compute, for TPU/GPU serving).",
        choices=("float32", "training"),
    )
    export_bfloat16: str = _flag(
        "auto",
        "Also write a bfloat16 copy of the model, MODEL_DIR/bfloat16 (trainer.predict/"
        "serve --precision), kept only if it agrees with float32 on validation (99%% of "
        "labels, metric within 0.5 point). 'auto': on where this machine computes "
        "bfloat16 natively (AVX512_BF16/AMX CPU, TPU, GPU of compute capability 8.0+).",
        choices=("auto", "on", "off"),
    )
    export_int8: str = _flag(
        "auto",
        "Also write an int8 copy of the model, MODEL_DIR/int8 (TensorFlow Lite, "
        "dynamic-range quantized: trainer.predict/serve --precision), kept only if it "
        "agrees with float32 on validation as the bfloat16 copy must. 'auto': on unless "
        "--encoder-backend hub.",
        choices=("auto", "on", "off"),
    )
    export_onnx: str = _flag(
        "auto",
        "Also write ONNX copies of the model, each with its tokenizer, for "
        "trainer.predict/serve --runtime onnx (no TensorFlow needed): MODEL_DIR/onnx "
        "(float32, kept only if every output is within 1e-4 of the SavedModel's on "
        "validation) and MODEL_DIR/onnx-int8 (ONNX Runtime's dynamic quantization, kept "
        "only if it agrees as the int8 copy must). 'auto': whenever the run's task and "
        "settings convert (not --encoder-backend hub or a TF-Hub --preprocessor: "
        "docs/onnx.md).",
        choices=("auto", "on", "off"),
    )


@dataclasses.dataclass
class OutputConfig:
    job_dir: str | None = _flag(
        None,
        "Where every artifact goes (local or gs://). Default: $AIP_MODEL_DIR's parent on "
        "Vertex, else runs/run-<timestamp>.",
    )
    model_dir: str | None = _flag(
        None, "Where the exported SavedModel goes. Default: $AIP_MODEL_DIR, else JOB_DIR/model."
    )
    checkpoint_dir: str | None = _flag(
        None, "Checkpoints for resuming. Default: $AIP_CHECKPOINT_DIR, else JOB_DIR/checkpoints."
    )
    tensorboard_dir: str | None = _flag(
        None, "TensorBoard logs. Default: $AIP_TENSORBOARD_LOG_DIR, else JOB_DIR/tensorboard."
    )
    cache_dir: str | None = _flag(
        None,
        "Cache for converted pretrained encoders and, under tokens/, tokenized data "
        "(reused by resumed runs and by tuning trials with the same data and tokenizer). "
        "Default: encoders in $VBT_CACHE_DIR, else ~/.cache/vertex-bert-trainer; tokens "
        "in JOB_DIR/cache.",
    )
    overwrite: bool = _flag(
        False,
        "Replace a finished run in --job-dir instead of stopping. An unfinished run is "
        "always resumed from its last checkpoint.",
    )
    keep_checkpoints: str = _flag(
        "none",
        "What of the checkpoints a finished run keeps. 'none': nothing (the exported "
        "model holds the best epoch's weights, and a finished run is never resumed: for "
        "the quick start that is 340 MB less); 'best': the best epoch's weights "
        "(checkpoints/best); 'all': those and the resume checkpoint (model, optimizer, "
        "epoch). An unfinished run keeps everything it needs to resume either way.",
        choices=("all", "best", "none"),
    )
    calibrate: str = _flag(
        "on",
        "Classification: fit a temperature on the validation set after training (one "
        "scalar minimizing its log loss) and have the exported model divide its logits by "
        "it, so that its probabilities mean what they say. The predicted label never "
        "changes. 'off' still records the fitted temperature in metrics.json but exports "
        "T = 1.",
        choices=("on", "off"),
    )
    report_errors: int = _flag(
        50,
        "How many of the validation and test errors (misclassified rows; regression: the "
        "largest absolute errors; token classification: the sentences with the most "
        "entities missed or wrongly found) errors.csv and report.html list per split, "
        "highest loss first (0: none).",
    )
    report_correct: int = _flag(
        0,
        "After the errors, how many of the least confident correct validation and test "
        "predictions errors.csv and report.html list per split (classification and "
        "multi-label; their `outcome` column says 'correct').",
    )
    report: str = _flag(
        "on",
        "Write report.html, report/*.png, errors.csv and MODEL_CARD.md at the end of the "
        "run. 'off': a tuning trial's (trainer.tune), whose search reads metrics.json only; "
        "`python -m trainer.report --job-dir DIR` writes them later.",
        choices=("on", "off"),
    )
    report_explanations: int = _flag(
        20,
        "How many test rows (validation without a test split) report.html colours by their "
        "token attributions: half of them the worst errors, half a seeded sample of the "
        "rest. Each costs about --ig-steps forward and backward passes of the model (more "
        "for a row that does not add up, while time allows); they get a tenth of the run's "
        "training time, at least 10 s, and the report names any row left out (0: none). "
        "A tagger's report has none: an attribution explains one label of a whole text.",
    )
    ig_steps: int = _flag(
        32,
        "Integrated-gradients steps of the token attributions report.html colours: more "
        "steps, attributions that sum closer to the model's output (a row that misses by "
        "over 5 percent is redone with up to 8x the steps).",
    )
    target_precision: float | None = _flag(
        None,
        "Binary and multi-label tasks: the decision threshold becomes the lowest one whose "
        "validation precision reaches this, in (0, 1]; the export stores it, so predict and "
        "serve apply it (report.html draws the precision-recall curve with the point).",
    )
    target_recall: float | None = _flag(
        None, "Like --target-precision, for recall: the highest threshold whose validation recall reaches this."
    )
    experiment: str | None = _flag(
        None,
        "Vertex AI Experiments: the chief logs the run's hyperparameters, its final "
        "metrics and each evaluation's validation metrics (as time series) to this "
        "experiment, in a run named after the job. An Experiments error costs one "
        "warning line, never the run.",
    )


@dataclasses.dataclass
class Config:
    data: DataConfig = dataclasses.field(default_factory=DataConfig)
    model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
    distillation: DistillationConfig = dataclasses.field(default_factory=DistillationConfig)
    train: TrainConfig = dataclasses.field(default_factory=TrainConfig)
    runtime: RuntimeConfig = dataclasses.field(default_factory=RuntimeConfig)
    output: OutputConfig = dataclasses.field(default_factory=OutputConfig)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, values: Mapping) -> "Config":
        sections = {}
        for section in dataclasses.fields(cls):
            section_type = section.type if isinstance(section.type, type) else _SECTION_TYPES[section.name]
            known = {f.name for f in dataclasses.fields(section_type)}
            given = dict(values.get(section.name, {}))
            unknown = set(given) - known
            if unknown:
                raise UserError(f"config section '{section.name}' has unknown keys: {sorted(unknown)}")
            sections[section.name] = section_type(**given)
        return cls(**sections)


_SECTION_TYPES = {
    "data": DataConfig,
    "model": ModelConfig,
    "distillation": DistillationConfig,
    "train": TrainConfig,
    "runtime": RuntimeConfig,
    "output": OutputConfig,
}


def flag_name(field_name: str) -> str:
    return "--" + field_name.replace("_", "-")


def _base_type(annotation):
    """int for Optional[int], and so on."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    return args[0] if args else annotation


def integer(text: str) -> int:
    """An int flag that also takes '32.0': tuning services may print discrete values as floats.

    (argparse names the type function in its messages: "invalid integer value: 'abc'".)"""
    value = float(text)
    if value != int(value):
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}")
    return int(value)


def build_arg_parser() -> argparse.ArgumentParser:
    parser = cli.ArgumentParser(
        prog="python -m trainer.task",
        description="Fine-tune a BERT-family encoder to classify texts or sentence pairs, to "
        "predict a number or a set of labels for each, or to tag each word (named "
        "entities): --task. With no data flags it trains a classifier on the sample "
        "posts shipped in the package.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        allow_abbrev=False,
    )
    hints = typing.get_type_hints(Config)
    for section in dataclasses.fields(Config):
        group = parser.add_argument_group(section.name)
        for field in dataclasses.fields(hints[section.name]):
            kwargs = {
                "help": field.metadata["help"] + _resolved(field.metadata.get("help_after", "")),
                "dest": f"{section.name}.{field.name}",
                "default": argparse.SUPPRESS,
            }
            field_type = _base_type(typing.get_type_hints(hints[section.name])[field.name])
            if field_type is bool:
                kwargs["action"] = argparse.BooleanOptionalAction
            else:
                kwargs["type"] = field.metadata.get("type") or (integer if field_type is int else field_type)
                kwargs["metavar"] = field.name.upper()
                if "choices" in field.metadata:
                    kwargs["choices"] = _resolved(field.metadata["choices"])
                    kwargs.pop("metavar")
            # Show the real default in --help although parsing leaves unset flags out.
            default = field.default_factory() if field.default is dataclasses.MISSING else field.default
            kwargs["help"] += f" (default: {default})"
            group.add_argument(flag_name(field.name), *field.metadata.get("aliases", ()), **kwargs)
    return parser


def accepted_flags() -> set:
    """Every flag `trainer.task` accepts, e.g. {'--learning-rate', ...}."""
    return {
        action.option_strings[0]
        for action in build_arg_parser()._actions
        if action.option_strings and action.option_strings[0] != "-h"
    }


def parse_flags(argv: Sequence[str], environ: Mapping[str, str]) -> dict:
    """Flags as {"section": {"field": value}}, only those given on the command line.

    A mistyped flag on a user's machine is an error with a suggestion. Inside a Vertex job the
    unknown ones are tolerated (`ignored_arguments` names them for the job's log): arguments
    Vertex adds itself must not fail a job that has already been paid for.
    """
    parser = build_arg_parser()
    namespace, unknown = parser.parse_known_args(list(argv))
    if unknown and not vertex.read_environment(environ).on_vertex:
        flag = unknown[0].split("=")[0]
        close = difflib.get_close_matches(flag, sorted(accepted_flags()), n=1)
        hint = f" Did you mean {close[0]}?" if close else " See --help."
        raise UserError(f"unknown argument {unknown[0]!r}.{hint}")
    given = {}
    for dest, value in vars(namespace).items():
        section, name = dest.split(".")
        given.setdefault(section, {})[name] = value
    return given


def ignored_arguments(argv: Sequence[str]) -> list:
    """The arguments `parse_flags` tolerated inside a Vertex job (none elsewhere: it raised)."""
    return build_arg_parser().parse_known_args(list(argv))[1]


def build_config(argv: Sequence[str], environ: Mapping[str, str], now=None) -> Config:
    """Flags first, then the Vertex environment, then defaults; validated."""
    given = parse_flags(argv, environ)
    config = Config.from_dict(given)
    _apply_environment(config, vertex.read_environment(environ), given, now)
    _apply_task_defaults(config, given)
    validate(config, given)
    return config


def _apply_environment(config: Config, env: "vertex.VertexEnvironment", given: dict, now) -> None:
    data, out = config.data, config.output
    data.training_file = data.training_file or env.training_data_uri
    data.validation_file = data.validation_file or env.validation_data_uri
    data.testing_file = data.testing_file or env.test_data_uri
    if out.job_dir is None:
        if env.model_dir:
            # AIP_MODEL_DIR is <base_output_directory>/model (per trial in tuning jobs), and
            # Vertex's other directories sit beside it: use them all.
            out.job_dir = env.model_dir.rstrip("/").rsplit("/", 1)[0]
            out.model_dir = out.model_dir or env.model_dir
            out.checkpoint_dir = out.checkpoint_dir or env.checkpoint_dir
        else:
            stamp = (now or datetime.datetime.now()).strftime("%Y%m%d-%H%M%S")
            out.job_dir = os.path.join("runs", f"run-{stamp}")
    elif env.trial_id:
        # An explicit --job-dir holds every artifact. Trials of one tuning job share the job's
        # flags, so each trial gets its own directory under it.
        out.job_dir = storage.join(out.job_dir, f"trial-{env.trial_id}")
    out.model_dir = out.model_dir or storage.join(out.job_dir, "model")
    out.checkpoint_dir = out.checkpoint_dir or storage.join(out.job_dir, "checkpoints")
    # Vertex TensorBoard uploads from AIP_TENSORBOARD_LOG_DIR, so it wins over the job dir.
    out.tensorboard_dir = out.tensorboard_dir or env.tensorboard_dir or storage.join(out.job_dir, "tensorboard")


def _apply_task_defaults(config: Config, given: dict) -> None:
    """--task auto and the flags a kind leaves to its data are decided; an unset
    --selection-metric becomes the task's own default (regression: val_spearman)."""
    if config.model.task == task_registry.AUTO:
        config.model.task = task_registry.auto_task(config.data.training_file) or task_registry.AUTO
    task_registry.settle(config)
    if "selection_metric" not in given.get("train", {}):
        config.train.selection_metric = task_registry.from_config(config).default_metric


def _validate_task(config: Config, require) -> None:
    """--selection-metric among the task's metrics, and the flags the task checks itself."""
    task = task_registry.from_config(config)
    metrics = list(task.metric_goals)
    require(
        config.train.selection_metric in metrics,
        "--selection-metric",
        f"{config.train.selection_metric} is not a {task.name} metric; choose one of {metrics}",
    )
    task.check_flags(config, require)


def validate(config: Config, given: dict | None = None) -> None:
    """Every check that needs no data or TensorFlow, with the flag named in the message."""
    given = given or {}

    def require(ok, flag, message):
        if not ok:
            raise UserError(f"{flag}: {message}")

    _validate_data(config, given, require)
    _validate_training(config, require)
    _validate_outputs(config, require)
    _validate_encoder(config, require)
    _validate_distillation(config, given, require)
    _validate_task(config, require)


def _validate_data(config: Config, given: dict, require) -> None:
    """Splits, sequence length, long texts and label names."""
    d, m = config.data, config.model
    require(0.0 < d.train_fraction <= 1.0, "--train-fraction", f"must be in (0, 1], got {d.train_fraction}")
    require(
        0.0 < d.validation_fraction < 0.5, "--validation-fraction", f"must be in (0, 0.5), got {d.validation_fraction}"
    )
    require(
        d.validation_file is None or "validation_fraction" not in given.get("data", {}),
        "--validation-fraction",
        "cannot be combined with --validation-file",
    )
    require(8 <= d.max_seq_length <= 512, "--max-seq-length", f"must be in [8, 512], got {d.max_seq_length}")
    for flag in ("window_overlap", "max_windows"):
        require(
            d.long_texts == "windows" or flag not in given.get("data", {}),
            "--" + flag.replace("_", "-"),
            "applies to --long-texts windows only",
        )
    require(
        m.window_pooling == "mean" or d.long_texts == "windows" or "window_pooling" not in given.get("model", {}),
        "--window-pooling",
        "applies to --long-texts windows only",
    )
    # The windows' token budget is --max-seq-length less at most 3 special tokens; a stride
    # (budget - overlap) of at least a quarter of it bounds the windows a text needs.
    most = (d.max_seq_length - 3) * 3 // 4
    require(
        d.window_overlap is None or 0 <= d.window_overlap <= most,
        "--window-overlap",
        f"must be in [0, {most}] (three quarters of a --max-seq-length {d.max_seq_length} "
        f"window's text), got {d.window_overlap}",
    )
    require(1 <= d.max_windows <= 64, "--max-windows", f"must be in [1, 64], got {d.max_windows}")
    if d.label_names is not None:
        names = [n.strip() for n in d.label_names.split(",")]
        require(
            len(names) >= 2 and all(names),
            "--label-names",
            f"needs at least two non-empty comma-separated names, got {d.label_names!r}",
        )
        require(len(set(names)) == len(names), "--label-names", f"has duplicates: {d.label_names!r}")
        require(
            d.label_type != "score" or len(names) == 3,
            "--label-names",
            "with --label-type score needs exactly three names (negative,neutral,positive)",
        )


def _validate_training(config: Config, require) -> None:
    """The schedule's, the batches' and the logs' numbers."""
    m, t, r = config.model, config.train, config.runtime
    require(0.0 <= m.dropout < 1.0, "--dropout", f"must be in [0, 1), got {m.dropout}")
    require(t.epochs is None or t.epochs >= 1, "--epochs", f"must be at least 1, got {t.epochs}")
    require(t.max_steps >= 0, "--max-steps", f"must be >= 0, got {t.max_steps}")
    require(t.eval_every_steps >= 0, "--eval-every-steps", f"must be >= 0, got {t.eval_every_steps}")
    # Keras runs --steps-per-execution steps per call: a limit between two calls only.
    for flag, steps in (("--max-steps", t.max_steps), ("--eval-every-steps", t.eval_every_steps)):
        require(
            steps % r.steps_per_execution == 0,
            flag,
            f"must be a multiple of --steps-per-execution {r.steps_per_execution}, got {steps}",
        )
    require(t.batch_size >= 1, "--batch-size", f"must be at least 1, got {t.batch_size}")
    require(
        t.gradient_accumulation_steps >= 1,
        "--gradient-accumulation-steps",
        f"must be at least 1, got {t.gradient_accumulation_steps}",
    )
    require(t.eval_batch_size >= 1, "--eval-batch-size", f"must be at least 1, got {t.eval_batch_size}")
    require(
        t.learning_rate is None or t.learning_rate > 0, "--learning-rate", f"must be positive, got {t.learning_rate}"
    )
    require(0.0 <= t.warmup_fraction < 1.0, "--warmup-fraction", f"must be in [0, 1), got {t.warmup_fraction}")
    require(t.weight_decay >= 0, "--weight-decay", f"must be >= 0, got {t.weight_decay}")
    require(t.layer_decay is None or 0 < t.layer_decay <= 1, "--layer-decay", f"must be in (0, 1], got {t.layer_decay}")
    require(t.clip_norm >= 0, "--clip-norm", f"must be >= 0, got {t.clip_norm}")
    require(
        t.early_stopping_patience >= 0, "--early-stopping-patience", f"must be >= 0, got {t.early_stopping_patience}"
    )
    require(r.steps_per_execution >= 1, "--steps-per-execution", f"must be at least 1, got {r.steps_per_execution}")
    require(r.log_every_steps >= 0, "--log-every-steps", f"must be >= 0, got {r.log_every_steps}")
    require(r.log_every_seconds > 0, "--log-every-seconds", f"must be positive, got {r.log_every_seconds}")
    require(config.output.report_errors >= 0, "--report-errors", f"must be >= 0, got {config.output.report_errors}")
    require(config.output.report_correct >= 0, "--report-correct", f"must be >= 0, got {config.output.report_correct}")


def _validate_encoder(config: Config, require) -> None:
    """What the encoder's backend allows: XLA, a shallower student, the checked copies."""
    m, r = config.model, config.runtime
    require(
        not (m.encoder_backend == "hub" and r.jit_compile == "on" and not m.freeze_encoder),
        "--jit-compile",
        "'on' cannot train a hub.KerasLayer encoder: XLA recompiles it every "
        "step (about 30x slower). Use --encoder-backend native or --freeze-encoder.",
    )
    require(
        m.encoder_layers is None or m.encoder_layers >= 1,
        "--encoder-layers",
        f"must be at least 1, got {m.encoder_layers}",
    )
    require(
        m.encoder_layers is None or m.encoder_backend == "native",
        "--encoder-layers",
        "needs --encoder-backend native (a hub.KerasLayer's layers are its SavedModel's)",
    )
    require(
        not (m.encoder_backend == "hub" and r.export_bfloat16 == "on"),
        "--export-bfloat16",
        "'on' needs --encoder-backend native: a hub.KerasLayer keeps the dtypes it was "
        "exported with (tensorflow/hub#466), so its copy would not compute in bfloat16",
    )
    require(
        not (m.encoder_backend == "hub" and r.export_onnx == "on"),
        "--export-onnx",
        "'on' needs --encoder-backend native: a hub.KerasLayer's graph is its publisher's, not converted to ONNX",
    )
    require(
        not (m.preprocessor and r.export_onnx == "on"),
        "--export-onnx",
        "'on' cannot be met with --preprocessor: a TF-Hub preprocessor tokenizes in its own "
        "graph, which the ONNX copies' tokenizer.json cannot carry",
    )


def _validate_distillation(config: Config, given: dict, require) -> None:
    x, t = config.distillation, config.train
    require(
        not (x.teacher and x.teacher_probabilities),
        "--teacher-probabilities",
        "cannot be combined with --teacher: one teacher per run",
    )
    require(
        x.unlabeled_file is None or x.teacher_source,
        "--unlabeled-file",
        "needs --teacher or --teacher-probabilities (a teacher labels those texts)",
    )
    require(x.distill_temperature > 0, "--distill-temperature", f"must be positive, got {x.distill_temperature}")
    require(0.0 <= x.distill_alpha <= 1.0, "--distill-alpha", f"must be in [0, 1], got {x.distill_alpha}")
    if not x.teacher_source:
        for flag in ("distill_temperature", "distill_alpha"):
            require(
                flag not in given.get("distillation", {}),
                flag_name(flag),
                "applies with --teacher or --teacher-probabilities only",
            )
        return
    require(
        t.class_weights != "balanced",
        "--class-weights",
        "'balanced' cannot be combined with a teacher: the teacher's probabilities already "
        "say how likely each class is",
    )
    require(
        not t.find_label_issues,
        "--find-label-issues",
        "cannot be combined with a teacher: its folds would learn from the teacher's "
        "probabilities of the very rows they judge",
    )


def _validate_outputs(config: Config, require) -> None:
    o, t = config.output, config.train
    require(o.ig_steps >= 1, "--ig-steps", f"must be at least 1, got {o.ig_steps}")
    require(o.report_explanations >= 0, "--report-explanations", f"must be >= 0, got {o.report_explanations}")
    require(t.label_issue_folds >= 2, "--label-issue-folds", f"must be at least 2, got {t.label_issue_folds}")
    for flag, value in (("--target-precision", o.target_precision), ("--target-recall", o.target_recall)):
        require(value is None or 0.0 < value <= 1.0, flag, f"must be in (0, 1], got {value}")
    require(
        o.target_precision is None or o.target_recall is None,
        "--target-recall",
        "cannot be combined with --target-precision: one operating point per model",
    )
    # Vertex AI Experiments' resource-name rule for an experiment id.
    require(
        o.experiment is None or re.fullmatch(r"[a-z0-9][a-z0-9-]{0,127}", o.experiment),
        "--experiment",
        f"must be lower-case letters, digits and '-' (at most 128, not starting with '-'), got {o.experiment!r}",
    )


def save(config: Config, path: str) -> None:
    storage.write_text_atomic(path, config.to_json() + "\n")


def load(path: str) -> Config:
    return Config.from_dict(json.loads(storage.read_text(path)))
