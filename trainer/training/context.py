"""What the stages of a run hand to each other: one object, filled in stage by stage."""

import dataclasses
import os
import time
from collections.abc import Mapping
from typing import Any

from trainer.config import Config


@dataclasses.dataclass
class Runtime:
    """Where and how the run computes (resolve_runtime)."""

    devices: Any  # distribution.Devices
    plan: Any  # distribution.RuntimePlan
    strategy: Any  # tf.distribute.Strategy
    precision_note: str
    scratch: str | None  # a non-chief worker's private directory, else None

    def write_path(self, path: str) -> str:
        """Every worker writes (collectives need them all); only the chief's copy is kept."""
        if self.scratch is None:
            return path
        return os.path.join(self.scratch, os.path.basename(path.rstrip("/")))


@dataclasses.dataclass
class Inputs:
    """Token ids of every split and how they are batched (tokenize)."""

    tokenized: dict[str, Any]  # name -> pipeline.TokenizedSplit
    # What the model trains on: tokenized["train"], or with --unlabeled-file a
    # transfer.TransferSplit of it and the unlabeled rows
    training: Any
    train_batching: Any
    eval_sets: dict[str, Any]  # name -> tf.data.Dataset of (features, labels, weights)
    steps_per_epoch: int
    epochs: int
    truncated: dict[str, int]
    total_steps: int = 0  # optimizer steps of the whole run: the learning-rate schedule's length
    # What Keras calls an epoch here, the steps between two evaluations and checkpoints: an epoch
    # of the data, or --eval-every-steps; and how many of them the run has.
    period_steps: int = 0
    periods: int = 0


@dataclasses.dataclass
class Trainable:
    """The model and what resumes it (build_model)."""

    model: Any  # heads.Classifier
    checkpoint: Any  # tf.train.CheckpointManager of the resume state
    epoch_counter: Any  # tf.Variable: completed periods (epochs, or --eval-every-steps spans)
    first_epoch: int  # periods completed before this process started
    history: list  # eval_history.csv rows up to first_epoch


@dataclasses.dataclass
class RunContext:
    config: Config
    environ: Mapping[str, str]
    paths: Any  # jobdir.JobPaths
    is_chief: bool
    ignored_arguments: tuple = ()
    started: float = dataclasses.field(default_factory=time.perf_counter)
    state: str = "new"  # jobdir.NEW / RESUME / FINISHED
    run_log: Any = None
    lock: Any = None  # lock.Held: the job dir's, while this run (the chief) owns it
    task: Any = None  # trainer.tasks: what the head predicts, its loss and metrics
    teacher: Any = None  # teacher.Teacher, with --teacher or --teacher-probabilities
    datasets: Any = None  # splits.Datasets
    runtime: Runtime | None = None
    encoder: Any = None  # encoders.Encoder
    pooling: str | None = None
    learning_rate: float | None = None  # --learning-rate, or the default for the encoder's width
    layer_decay: float | None = None  # --layer-decay, or the default for the encoder's width
    inputs: Inputs | None = None
    trainable: Trainable | None = None
    fit: Any = None  # stages.FitOutcome
    results: dict[str, dict] = dataclasses.field(default_factory=dict)
    # (outputs, labels) of validation and test with the final weights, in row order: the metrics,
    # calibration, thresholds and the report all come from this one prediction pass (evaluate)
    outputs: dict[str, tuple] = dataclasses.field(default_factory=dict)
    calibration: dict | None = None  # metrics.json's "calibration" block
    precisions: dict[str, dict] = dataclasses.field(default_factory=dict)  # metrics.json's block
    operating_point: dict | None = None  # metrics.json's block (--target-precision/-recall)
    label_issues: dict | None = None  # metrics.json's block (label_issues.csv's summary)
    # {held-out split: its texts found inside training texts} (held_out.check_containment)
    contained: dict[str, dict] = dataclasses.field(default_factory=dict)
    durations: dict[str, float] = dataclasses.field(default_factory=dict)
    train_steps: int | None = None  # optimizer steps when training ended (results.evaluate)
    metrics: dict | None = None
    # --long-texts and its window flags (input_pipeline.LongTexts), resolved once from the config
    # (the window overlap's default is a quarter of --max-seq-length): every stage reads this.
    long_texts: Any = None

    def __post_init__(self):
        if self.long_texts is None:
            from trainer.data.input_pipeline import LongTexts

            self.long_texts = LongTexts.from_config(self.config.data)

    @property
    def windows(self) -> bool:
        """--long-texts windows: each text read in windows, pooled into one vector."""
        return self.long_texts.mode == "windows"

    @property
    def hub_encoder(self) -> bool:
        """--encoder-backend hub: the encoder is a hub.KerasLayer (its SavedModel's graph and
        dtypes), not a network rebuilt from Keras layers."""
        return self.config.model.encoder_backend == "hub"
