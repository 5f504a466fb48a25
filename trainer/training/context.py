"""What the stages of a run hand to each other: one object, filled in stage by stage, whose
every field is typed (docs/architecture.md, "A run's stages": which stage writes each)."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from trainer.config import Config

if TYPE_CHECKING:  # the types alone: importing them would load TensorFlow and the stages
    import numpy as np
    import tensorflow as tf
    import tf_keras

    from trainer.data.input_pipeline import Batching, LongTexts, TokenizedSplit
    from trainer.data.splits import Datasets
    from trainer.data.transfer import TransferSplit
    from trainer.modeling.encoders import Encoder
    from trainer.tasks.base import Task
    from trainer.training.callbacks import BestWeights, EpochEvaluation, HistoryWriter, TrainingClock
    from trainer.training.distribution import Devices, RuntimePlan
    from trainer.training.jobdir import JobPaths
    from trainer.training.lock import Held
    from trainer.training.runlog import RunLog
    from trainer.vertex.experiments import ExperimentLog
    from trainer.vertex.hypertune import HypertuneReporter


@dataclasses.dataclass
class Runtime:
    """Where and how the run computes (resolve_runtime)."""

    devices: Devices
    plan: RuntimePlan
    strategy: tf.distribute.Strategy
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

    tokenized: dict[str, TokenizedSplit]
    # What the model trains on: tokenized["train"], or with --unlabeled-file a
    # transfer.TransferSplit of it and the unlabeled rows
    training: TokenizedSplit | TransferSplit
    train_batching: Batching
    eval_sets: dict[str, tf.data.Dataset]  # of (features, labels, weights)
    steps_per_epoch: int
    epochs: int
    truncated: dict[str, int]
    total_steps: int = 0  # optimizer steps of the whole run: the learning-rate schedule's length
    # What Keras calls an epoch here, the steps between two evaluations and checkpoints: an epoch
    # of the data, or --eval-every-steps; and how many of them the run has.
    period_steps: int = 0
    periods: int = 0
    # The teacher's validation values aligned as the validation labels are (the unit's tokenize
    # aligns a tagger's words to tokens), or None: its metrics beside the student's.
    teacher_validation: np.ndarray | None = None


@dataclasses.dataclass
class Trainable:
    """The model and what resumes it (build_model)."""

    model: tf_keras.Model  # heads.Classifier's
    checkpoint: tf.train.CheckpointManager  # of the resume state
    epoch_counter: tf.Variable  # completed periods (epochs, or --eval-every-steps spans)
    first_epoch: int  # periods completed before this process started
    history: list[dict]  # eval_history.csv rows up to first_epoch


@dataclasses.dataclass
class Teacher:
    """What the run knows of its teacher, for metrics.json's `distillation` block."""

    source: str  # --teacher or --teacher-probabilities
    kind: str  # "model" or "file"
    file: str  # the file its outputs were read from
    validation: np.ndarray | None  # its values for the validation rows, None if not all there
    seconds: float  # running the model teacher (0 when its file was reused or given)


@dataclasses.dataclass
class FitOutcome:
    """The callbacks of the fit stage, which later stages read (best weights, the latest evaluation)."""

    clock: TrainingClock
    evaluation: EpochEvaluation  # the latest validation result
    history: HistoryWriter
    best: BestWeights
    hypertune: HypertuneReporter | None  # chief only
    experiment: ExperimentLog | None  # chief with --experiment only
    stopped_before: bool  # a resumed run whose early stopping had already decided


@dataclasses.dataclass
class RunContext:
    config: Config
    environ: Mapping[str, str]
    paths: JobPaths
    is_chief: bool
    ignored_arguments: tuple = ()
    started: float = dataclasses.field(default_factory=time.perf_counter)
    state: str = "new"  # jobdir.NEW / RESUME / FINISHED
    run_log: RunLog | None = None
    lock: Held | None = None  # the job dir's, while this run (the chief) owns it
    task: Task | None = None  # what the head predicts, its loss and metrics
    teacher: Teacher | None = None  # with --teacher or --teacher-probabilities
    datasets: Datasets | None = None
    runtime: Runtime | None = None
    encoder: Encoder | None = None
    pooling: str | None = None
    learning_rate: float | None = None  # --learning-rate, or the default for the encoder's width
    layer_decay: float | None = None  # --layer-decay, or the default for the encoder's width
    inputs: Inputs | None = None
    trainable: Trainable | None = None
    fit: FitOutcome | None = None
    results: dict[str, dict] = dataclasses.field(default_factory=dict)
    # (outputs, labels) of validation and test with the final weights, in row order: the metrics,
    # calibration, thresholds and the report all come from this one prediction pass (evaluate)
    outputs: dict[str, tuple] = dataclasses.field(default_factory=dict)
    calibration: dict | None = None  # metrics.json's "calibration" block
    precisions: dict[str, dict] = dataclasses.field(default_factory=dict)  # metrics.json's block
    operating_point: dict | None = None  # metrics.json's block (--target-precision/-recall)
    label_issues: dict | None = None  # metrics.json's block (label_issues.csv's summary)
    zero_shot: dict | None = None  # metrics.json's block: validation before training (Task.zero_shot)
    # {held-out split: its texts found inside training texts} (held_out.check_containment)
    contained: dict[str, dict] = dataclasses.field(default_factory=dict)
    durations: dict[str, float] = dataclasses.field(default_factory=dict)
    train_steps: int | None = None  # optimizer steps when training ended (results.evaluate)
    metrics: dict | None = None
    # --long-texts and its window flags (input_pipeline.LongTexts), resolved once from the config
    # (the window overlap's default is a quarter of --max-seq-length): every stage reads this.
    long_texts: LongTexts | None = None

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
