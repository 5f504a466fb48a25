"""Report the tuning objective to Vertex AI hyperparameter tuning, and stay silent everywhere else.

A trial's measurements reach Vertex through the file cloudml-hypertune writes:
$CLOUD_ML_HP_METRIC_FILE, default /tmp/hypertune/output.metrics (hypertune/hypertune.py). Two
quirks of that library shape this module:

- `HyperTune()` creates the file's directory as soon as it is constructed, so it is constructed
  only when someone reads the file: inside a tuning trial (Vertex sets CLOUD_ML_TRIAL_ID there) or
  when CLOUD_ML_HP_METRIC_FILE names a file explicitly (tests, checking a run by hand). A local run
  or a plain custom job reports nothing and leaves no /tmp/hypertune behind.
- every report rewrites the whole file from the instance's own queue, so a second instance would
  erase the first one's lines: one reporter holds one instance for the whole run, and the final
  report goes through it too.

The tag is the trainer's --selection-metric (its caller passes it, validated by config), the same value
`trainer.submit tune` puts in the job's metric spec.
"""

import os
from collections.abc import Mapping

import hypertune
import tf_keras

from trainer import task_registry


def reporting_enabled(environ: Mapping[str, str]) -> bool:
    """True inside a Vertex tuning trial, or when a metrics file is named explicitly."""
    return any(environ.get(name, "").strip() for name in ("CLOUD_ML_TRIAL_ID", "CLOUD_ML_HP_METRIC_FILE"))


class HypertuneReporter(tf_keras.callbacks.Callback):
    """Reports `logs[metric]` at the end of every epoch, with the 1-based epoch as global step.

    It reads the metric from the epoch logs, so it must come after the callback that evaluates
    the validation set and writes `val_*` into them. `reporter` replaces cloudml-hypertune (any
    object with `report_hyperparameter_tuning_metric`); given one, it always reports.
    """

    def __init__(self, metric: str, reporter=None):
        super().__init__()
        if metric not in task_registry.metric_goals():
            raise ValueError(
                f"unknown tuning metric {metric!r}; expected one of {sorted(task_registry.metric_goals())}"
            )
        self.metric = metric
        if reporter is None and reporting_enabled(os.environ):
            reporter = hypertune.HyperTune()
        self._reporter = reporter

    @property
    def active(self) -> bool:
        return self._reporter is not None

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        if self.metric not in logs:
            # A missing objective would surface on Vertex only as a trial without measurements.
            raise ValueError(
                f"HypertuneReporter: the epoch logs have no {self.metric!r} (they have "
                f"{sorted(logs)}); add it after the callback that evaluates validation metrics"
            )
        self._report(logs[self.metric], epoch + 1)

    def report_final(self, value: float, step: int) -> None:
        """The objective of the exported model, once, when training ends."""
        self._report(value, step)

    def _report(self, value, step: int) -> None:
        if self._reporter is not None:
            self._reporter.report_hyperparameter_tuning_metric(
                hyperparameter_metric_tag=self.metric, metric_value=float(value), global_step=int(step)
            )
