"""Keras callbacks of a training run: evaluation, history, best weights, resume, progress.

Order matters and `trainer.training.fitting` keeps it: the epoch is evaluated first (its metrics go into
`logs` for everyone after), then its history row and best weights are written, and the resume
checkpoint comes last. A job killed between those writes therefore has a history at most one
row ahead of its checkpoint, which the resumed run drops before it redoes that epoch
(keras-team/keras#19179 and tf-keras#430 show what happens otherwise: duplicated or missing
epochs, and early stopping that forgets its best value).
"""

import csv
import io
import logging
import math
import time
from collections.abc import Callable, Sequence

import tensorflow as tf
import tf_keras

from trainer import progress, storage, task_registry
from trainer.errors import UserError
from trainer.progress import clock

log = logging.getLogger("trainer")

HISTORY_COLUMNS = (
    "epoch",
    "step",
    "loss",
    "accuracy",
    "val_loss",
    "val_accuracy",
    "val_macro_f1",
    "val_macro_recall",
    "learning_rate",
    "seconds",
)


def current_learning_rate(optimizer) -> float:
    rate = optimizer.learning_rate
    if isinstance(rate, tf_keras.optimizers.schedules.LearningRateSchedule):
        rate = rate(optimizer.iterations)
    return float(tf.keras.backend.get_value(rate)) if not hasattr(rate, "numpy") else float(rate.numpy())


class EpochEvaluation(tf_keras.callbacks.Callback):
    """Evaluates the validation split after every epoch and adds val_* metrics to `logs`.

    Keras' own validation reports only loss and accuracy; model selection and tuning here use
    macro-F1, which needs every prediction of the split. The latest predictions are kept: when
    the last epoch is the best, the final evaluation reuses them instead of predicting again.
    """

    def __init__(
        self,
        predict: Callable[[], tuple],
        summarize: Callable[..., dict],
        keys: Sequence[str] = ("loss", "accuracy", "macro_f1", "macro_recall"),
    ):
        super().__init__()
        self._predict, self._summarize, self.keys = predict, summarize, tuple(keys)
        self.seconds_evaluating = 0.0
        self._epoch_start = 0.0
        self.last, self.last_epoch = None, None  # the latest evaluation, of 1-based epoch
        self.last_outputs = None  # its (outputs, labels), in row order

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        logs = logs if logs is not None else {}
        train_seconds = time.perf_counter() - self._epoch_start
        start = time.perf_counter()
        self.last_outputs = self._predict()
        self.last, self.last_epoch = self._summarize(*self.last_outputs), epoch + 1
        self.seconds_evaluating += time.perf_counter() - start
        for key in self.keys:
            logs[f"val_{key}"] = self.last[key]
        logs["learning_rate"] = current_learning_rate(self.model.optimizer)
        logs["seconds"] = train_seconds + (time.perf_counter() - start)


class NonFiniteLoss(tf_keras.callbacks.Callback):
    """Ends the run with one error at the first training batch, or evaluation, whose loss is
    NaN or infinite.

    Keras' own TerminateOnNaN only sets `stop_training`: the epoch still ends, so its NaN
    weights would be evaluated, checkpointed as the point to resume from, calibrated and
    exported, and the run would exit 0. Raising here, before the callbacks that write anything
    for the epoch (keep it right after EpochEvaluation), leaves the checkpoints of the last good
    epoch as they were; the export and metrics.json stages never run.
    """

    def __init__(self, epochs: int, learning_rate: float, unit: str = "epoch"):
        super().__init__()
        self.epochs, self.learning_rate, self.unit = epochs, learning_rate, unit

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        self._check(logs, "loss", "training loss")

    def on_epoch_end(self, epoch, logs=None):
        self._check(logs, "val_loss", "validation loss")

    def _check(self, logs, key: str, what: str) -> None:
        value = (logs or {}).get(key)
        if value is None or math.isfinite(float(value)):
            return
        step = int(self.model.optimizer.iterations.numpy())
        kept, rerun = (
            (
                f"the checkpoint of {self.unit} {self.epoch}, the last with a finite loss, is kept",
                "the same command resumes from that checkpoint; with changed flags, add --overwrite to start over",
            )
            if self.epoch
            else (f"no {self.unit} finished before it, so no checkpoint is kept", "the next command starts over")
        )
        raise UserError(
            f"training diverged: the {what} became {float(value)} at step {step} ({self.unit} "
            f"{self.epoch + 1} of {self.epochs}); stopped, nothing exported, {kept}. Usual causes: "
            f"a learning rate too high (this run's peak: {self.learning_rate:g}; lower "
            f"--learning-rate), float16 without loss scaling, or targets the loss cannot take "
            f"(a label out of range, a NaN or huge score). Once fixed, rerun: {rerun}"
        )


def read_history(path: str) -> list[dict]:
    if not storage.exists(path):
        return []
    rows = list(csv.DictReader(io.StringIO(storage.read_text(path))))
    return [{k: (int(v) if k in ("epoch", "step") else float(v)) for k, v in row.items()} for row in rows]


def write_history(path: str, rows: list[dict], columns: Sequence[str] = HISTORY_COLUMNS) -> None:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: (f"{row[k]:.6g}" if isinstance(row[k], float) else row[k]) for k in columns})
    storage.write_text_atomic(path, out.getvalue())


class HistoryWriter(tf_keras.callbacks.Callback):
    """eval_history.csv: one row per evaluation, rewritten atomically each time: `epoch` is the
    1-based Keras epoch (an epoch of the data, or with --eval-every-steps the span of steps
    since the previous evaluation), `step` the optimizer's step."""

    def __init__(self, path: str | None, rows: list[dict], columns: Sequence[str] = HISTORY_COLUMNS):
        super().__init__()
        self.path, self.rows, self.columns = path, list(rows), tuple(columns)

    def on_epoch_end(self, epoch, logs=None):
        row = {
            "epoch": epoch + 1,
            "step": int(self.model.optimizer.iterations.numpy()),
            **{k: float(logs[k]) for k in self.columns if k not in ("epoch", "step")},
        }
        self.rows = [r for r in self.rows if r["epoch"] < row["epoch"]] + [row]
        if self.path:
            write_history(self.path, self.rows, self.columns)


def is_better(metric: str, value: float, best: float | None) -> bool:
    if best is None or math.isnan(best):
        return not math.isnan(value)
    return value > best if task_registry.metric_goals()[metric] == "maximize" else value < best


def best_so_far(rows: list[dict], metric: str):
    """(best epoch, best value) over history rows, as early stopping would have tracked them."""
    best_epoch, best = None, None
    for row in rows:
        if is_better(metric, row[metric], best):
            best_epoch, best = row["epoch"], row[metric]
    return best_epoch, best


class BestWeights(tf_keras.callbacks.Callback):
    """Keeps the best epoch's weights on disk and stops after `patience` epochs without gain.

    The best epoch, its value and the epochs waited are derived from the history rows the run
    resumed with, so a resumed run continues early stopping exactly where the killed one was.
    A best that is beaten is deleted only by `prune`, once the resume checkpoint of the epoch
    that beat it is written: a job killed in between still has the weights its history names.
    Under MultiWorkerMirroredStrategy every worker writes (a non-chief into a scratch
    `directory`); a best from before a restart is read from the chief's `shared_directory`.
    """

    def __init__(
        self,
        directory: str,
        metric: str,
        patience: int,
        rows: list[dict],
        shared_directory: str | None = None,
        unit: str = "epoch",
    ):
        super().__init__()
        self.directory, self.metric, self.patience = directory, metric, patience
        self.unit = unit  # "span" with --eval-every-steps (fitting.period_name)
        self.shared_directory = shared_directory or directory
        self.best_epoch, self.best = best_so_far(rows, metric)
        self._resumed_best_epoch = self.best_epoch
        self.stopped_early = False

    @property
    def weights_prefix(self) -> str | None:
        """Checkpoint prefix of the best epoch's weights; None while no epoch has a value."""
        if self.best_epoch is None:
            return None
        found_before_restart = self.best_epoch == self._resumed_best_epoch
        return _weights_prefix(self.shared_directory if found_before_restart else self.directory, self.best_epoch)

    def on_epoch_end(self, epoch, logs=None):
        value, finished = float(logs[self.metric]), epoch + 1
        if is_better(self.metric, value, self.best):
            self.best_epoch, self.best = finished, value
            tf.train.Checkpoint(model=self.model).write(_weights_prefix(self.directory, finished))
        elif self.patience and finished - self.best_epoch >= self.patience:
            log.info(
                "early stopping: %s has not improved for %d %ss (best %.4f at %s %d)",
                self.metric,
                self.patience,
                self.unit,
                self.best,
                self.unit,
                self.best_epoch,
            )
            self.stopped_early = True
            self.model.stop_training = True

    def prune(self):
        """Deletes every epoch's weights but the best's (call after the resume checkpoint)."""
        if not storage.exists(self.directory):
            return
        keep = f"epoch-{self.best_epoch}"
        for name in tf.io.gfile.listdir(self.directory):
            if name.rstrip("/") != keep:
                storage.remove(storage.join(self.directory, name.rstrip("/")))


def _weights_prefix(directory: str, epoch: int) -> str:
    return storage.join(storage.join(directory, f"epoch-{epoch}"), "weights")


def dropout_generators(model: tf_keras.Model) -> list:
    """The tf.random.Generator behind every dropout layer of `model`, in a stable order.

    Under `tf_keras.backend.experimental.enable_tf_random_generator()` each random layer draws
    from a generator whose state is a variable, which tf-keras leaves out of checkpoints on
    purpose (BaseRandomLayer); the resume checkpoint adds them, so a resumed run continues the
    dropout masks where the killed one stopped instead of replaying the first epoch's.
    A hub.KerasLayer's own dropout runs the legacy stateful ops of its SavedModel and has none.
    """
    generators = []
    for layer in model.submodules:
        generator = getattr(getattr(layer, "_random_generator", None), "_generator", None)
        if isinstance(generator, tf.random.Generator):
            generators.append(generator)
    return generators


class EpochCheckpoint(tf_keras.callbacks.Callback):
    """Model, optimizer (its step drives the learning-rate schedule), dropout generators and
    epoch, after each epoch; then `after_save` (BestWeights.prune).

    Written through tf.train.CheckpointManager, whose `checkpoint` index file is replaced only
    after the new checkpoint is complete.
    """

    def __init__(self, manager: tf.train.CheckpointManager, epoch: tf.Variable, after_save: Callable[[], None]):
        super().__init__()
        self.manager, self.epoch, self.after_save = manager, epoch, after_save

    def on_epoch_end(self, epoch, logs=None):
        self.epoch.assign(epoch + 1)
        self.manager.save(checkpoint_number=epoch + 1)
        self.after_save()


class StepLimit(tf_keras.callbacks.Callback):
    """--max-steps: stops training once the optimizer has taken `max_steps` steps. Keras then
    ends the epoch in progress there, so it is evaluated, recorded and checkpointed as any
    other; the optimizer's step is in the resume checkpoint, so a resumed run stops at the same
    step. Keep it first: the callbacks after it see the epoch end."""

    def __init__(self, max_steps: int):
        super().__init__()
        self.max_steps = max_steps

    def on_train_batch_end(self, batch, logs=None):
        if int(self.model.optimizer.iterations.numpy()) >= self.max_steps:
            self.model.stop_training = True


class StepScalars(tf_keras.callbacks.Callback):
    """--log-every-steps: every `every` optimizer steps, TensorBoard scalars under the run
    `steps` of `directory`: `loss` (the epoch's running mean, as Keras reports it during an
    epoch), `learning_rate` and `examples_per_second` since the previous point. Keras' own
    TensorBoard callback writes one point per epoch: a one-epoch run would show a dot."""

    def __init__(self, directory: str, every: int, batch_size: int):
        super().__init__()
        self.directory, self.every, self.batch_size = directory, every, batch_size
        self.writer = None

    def on_train_begin(self, logs=None):
        self.writer = tf.summary.create_file_writer(storage.join(self.directory, "steps"))
        self._last_step, self._last_time = None, time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        step = int(self.model.optimizer.iterations.numpy())
        if self._last_step is None:
            self._last_step = step - batch - 1  # where this process started (a resumed run later)
        # Steps jump by --steps-per-execution: write when a multiple of `every` was passed.
        if step // self.every == self._last_step // self.every:
            return
        now = time.perf_counter()
        rate = (step - self._last_step) * self.batch_size / max(now - self._last_time, 1e-9)
        with self.writer.as_default(step=step):
            tf.summary.scalar("loss", float(logs["loss"]))
            tf.summary.scalar("learning_rate", current_learning_rate(self.model.optimizer))
            tf.summary.scalar("examples_per_second", rate)
        self._last_step, self._last_time = step, now

    def on_epoch_end(self, epoch, logs=None):
        self.writer.flush()

    def on_train_end(self, logs=None):
        self.writer.close()


class TrainingClock(tf_keras.callbacks.Callback):
    """Time spent training (evaluation excluded), and the steady-state step rate.

    The first step of a run traces and optimizes the training graph (8-12 s for a 6-layer BERT
    on a 2-core CPU); the steady rate leaves it out, which is what throughput
    comparisons between configurations need. Keep this callback first, so that an epoch's
    clock stops before the epoch is evaluated.
    """

    def __init__(self):
        super().__init__()
        self.seconds, self.steady_seconds, self.steady_steps = 0.0, 0.0, 0
        self.first_step_seconds = None

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_start = self._last = time.perf_counter()
        self._last_batch = -1

    def on_train_batch_end(self, batch, logs=None):
        now = time.perf_counter()
        if self.first_step_seconds is None:
            self.first_step_seconds = now - self._last
            log.info("first training step done in %.1fs (graph tracing included)", self.first_step_seconds)
        else:
            self.steady_seconds += now - self._last
            self.steady_steps += batch - self._last_batch  # > 1 with --steps-per-execution
        self._last, self._last_batch = now, batch

    def on_epoch_end(self, epoch, logs=None):
        self.seconds += time.perf_counter() - self._epoch_start


class PredictionProgress(tf_keras.callbacks.Callback):
    """`evaluating validation 1,024/2,000 rows (51%)  310.2 rows/s  ETA 3s` while Keras predicts a
    split: at the end of a run evaluation can take minutes, and Keras' own bar is off (verbose=0)."""

    def __init__(
        self, what: str, interval: float, rows: int, batches: int, timer: Callable[[], float] = time.monotonic
    ):
        super().__init__()
        self.meter = progress.Progress(what, interval, total=rows, timer=timer)
        self.rows, self.batches = rows, batches

    def on_predict_batch_end(self, batch, logs=None):
        # Length-bucketed batches hold different numbers of rows: the row count is estimated
        # from the batches done, which is what the share and the ETA need.
        self.meter.update(min(self.rows, (batch + 1) * self.rows // max(1, self.batches)))


class ProgressLogger(tf_keras.callbacks.Callback):
    """A line every `interval` seconds: step, loss, throughput in examples and real tokens, ETA."""

    def __init__(
        self,
        interval: float,
        epochs: int,
        steps_per_epoch: int,
        examples_per_epoch: int,
        tokens_per_epoch: int,
        describe_epoch: Callable[[dict], str],
        train_metric: str = "accuracy",
        unit: str = "epoch",
    ):
        super().__init__()
        self.unit = unit  # "span" with --eval-every-steps: the steps between two evaluations
        # describe_epoch: an epoch's logs -> its metrics in the epoch's line (the task's)
        self.describe_epoch, self.train_metric = describe_epoch, train_metric
        self.interval, self.epochs, self.steps = interval, epochs, steps_per_epoch
        self.examples, self.tokens = examples_per_epoch, tokens_per_epoch
        self.epoch_seconds: list[float] = []

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch, self.start = epoch, time.perf_counter()
        self.last_line = self.start

    def on_train_batch_end(self, batch, logs=None):
        now = time.perf_counter()
        if now - self.last_line < self.interval:
            return
        self.last_line = now
        done = (batch + 1) / self.steps
        elapsed = now - self.start
        rate = done * self.examples / elapsed
        left_in_epoch = elapsed / done - elapsed
        left = left_in_epoch + (self.epochs - self.epoch - 1) * elapsed / done
        log.info(
            "%s %d/%d  step %d/%d  loss %.4f  %s %.3f  %.1f ex/s  %.0f tok/s  ETA %s %s, run %s",
            self.unit,
            self.epoch + 1,
            self.epochs,
            batch + 1,
            self.steps,
            logs.get("loss", float("nan")),
            "acc" if self.train_metric == "accuracy" else self.train_metric,
            logs.get(self.train_metric, float("nan")),
            rate,
            rate * self.tokens / max(1, self.examples),
            self.unit,
            clock(left_in_epoch),
            clock(left),
        )

    def on_epoch_end(self, epoch, logs=None):
        self.epoch_seconds.append(logs.get("seconds", time.perf_counter() - self.start))
        log.info(
            "%s %d/%d done in %s: %s | lr %.2e",
            self.unit,
            epoch + 1,
            self.epochs,
            clock(self.epoch_seconds[-1]),
            self.describe_epoch(logs),
            logs["learning_rate"],
        )
