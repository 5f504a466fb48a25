"""--experiment: the chief's record of the run in Vertex AI Experiments.

With the Vertex AI SDK (`aiplatform.init(experiment=...)`, `start_run`, `log_params`,
`log_time_series_metrics`, `log_metrics`, `end_run`): the run's flattened config as parameters,
each evaluation's validation metrics as one time-series point (step = the 1-based epoch or
span), and metrics.json's final split metrics at the end. Time series live in a Vertex AI
TensorBoard backing the experiment: the SDK uses the project's default TensorBoard instance and
creates one if there is none.

Only the chief logs: every worker computes the same metrics, and Vertex's own experiment
tracking for submitted jobs is not offered for distributed or TPU jobs
(https://cloud.google.com/vertex-ai/docs/experiments/run-training-job-experiments), so one
process per job writes one run. The run is named after the job directory (a tuning trial's
after the job and the trial); a job resumed after preemption continues its run.

Experiments is a record, not the training: any error there (credentials, quota, a 5xx after
the SDK's own retries, which last up to 2 minutes on reads) is one warning line, and every later
call is skipped.
"""

import json
import logging
import re
from collections.abc import Mapping

import tf_keras

from trainer.errors import UserError

log = logging.getLogger("trainer")

# An experiment run's context id is EXPERIMENT-RUN and its TensorBoard run artifact's id adds
# "-tb-run": 128 characters at most (aiplatform's metadata.constants._EXPERIMENT_RUN_MAX_LENGTH).
RUN_ID_LENGTH = 128 - len("-tb-run")
# Where aiplatform.init puts a run when no region is given.
DEFAULT_REGION = "us-central1"


def location(environ: Mapping[str, str]) -> tuple:
    """(project, region): Vertex sets CLOUD_ML_PROJECT_ID and CLOUD_ML_REGION in its jobs; on a
    laptop, GOOGLE_CLOUD_PROJECT and GOOGLE_CLOUD_REGION (the project is None when none is set)."""

    def get(*names):
        return next((environ[n].strip() for n in names if environ.get(n, "").strip()), None)

    return (
        get("CLOUD_ML_PROJECT_ID", "GOOGLE_CLOUD_PROJECT"),
        get("CLOUD_ML_REGION", "GOOGLE_CLOUD_REGION") or DEFAULT_REGION,
    )


def check(config, environ: Mapping[str, str]) -> None:
    """Before anything is read: --experiment needs a project to log to."""
    if config.output.experiment and location(environ)[0] is None:
        raise UserError(
            "--experiment: no Google Cloud project to log to: set GOOGLE_CLOUD_PROJECT "
            "(Vertex jobs set CLOUD_ML_PROJECT_ID themselves)"
        )


def run_name(job_dir: str, experiment: str) -> str:
    """The job dir's name (a trial's: the job's and the trial's), in the run-name rule: lower-case
    letters, digits and '-', starting with a letter or digit, short enough for its ids."""
    parts = job_dir.rstrip("/").split("/")
    parts = parts[-2:] if parts[-1].startswith("trial-") else parts[-1:]
    name = re.sub(r"[^a-z0-9-]+", "-", "-".join(parts).lower()).strip("-")
    return name[: RUN_ID_LENGTH - len(experiment) - 1].rstrip("-") or "run"


def flatten(block: dict, prefix: str = "") -> dict:
    """{"train": {"learning_rate": 0.1}} -> {"train.learning_rate": 0.1}: the values Experiments
    takes (numbers and strings); unset (None) values are left out, lists become JSON text."""
    out = {}
    for key, value in block.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, name + "."))
        elif isinstance(value, bool):
            out[name] = str(value).lower()
        elif isinstance(value, (int, float, str)):
            out[name] = value
        elif value is not None:
            out[name] = json.dumps(value)
    return out


def final_metrics(metrics: dict) -> dict:
    """metrics.json's numbers worth comparing runs on: each split's top-level metrics
    (test.macro_f1, ...), the best epoch and the throughput."""
    out = {
        f"{split}.{key}": value
        for split in ("train", "validation", "test")
        for key, value in (metrics.get(split) or {}).items()
        if isinstance(value, (int, float)) and not isinstance(value, bool)
    }
    out.update(
        {
            key: metrics[key]
            for key in ("best_epoch", "epochs_completed", "train_examples_per_second")
            if isinstance(metrics.get(key), (int, float)) and not isinstance(metrics.get(key), bool)
        }
    )
    return out


class ExperimentLog:
    """One run in one experiment; every call goes through `_call`, which turns a failure into
    one warning and stops all later calls."""

    def __init__(self, experiment: str, run: str, project: str, region: str, params: dict):
        self.experiment, self.run, self.project, self.region = experiment, run, project, region
        self._params = params
        self.active, self._started = True, False

    def _call(self, what: str, action) -> None:
        if not self.active:
            return
        try:
            action()
        except Exception as error:  # any SDK, auth or network error: the run goes on
            self.active = False
            reason = (str(error).strip().splitlines() or [type(error).__name__])[0][:300]
            log.warning("Vertex AI Experiments: %s failed (%s); training goes on without it", what, reason)

    def start(self) -> None:
        """The run (created, or continued after a restart) and its parameters, once."""
        if self._started:
            return
        self._started = True

        def start():
            from google.cloud import aiplatform

            # The SDK logs each resource it creates at INFO; our one line says where the run is.
            logging.getLogger("google.cloud.aiplatform").setLevel(logging.WARNING)
            aiplatform.init(project=self.project, location=self.region, experiment=self.experiment)
            try:
                aiplatform.start_run(self.run, resume=True)
            except Exception as error:
                if "not found" not in str(error).lower():
                    raise
                aiplatform.start_run(self.run)
            aiplatform.log_params(self._params)
            log.info(
                "Vertex AI Experiments: run %s of experiment %s (project %s, %s)",
                self.run,
                self.experiment,
                self.project,
                self.region,
            )

        self._call("starting the run", start)

    def evaluation(self, step: int, metrics: dict) -> None:
        from google.cloud import aiplatform

        self.start()
        self._call(f"logging evaluation {step}", lambda: aiplatform.log_time_series_metrics(metrics, step=step))

    def finish(self, metrics: dict) -> None:
        from google.cloud import aiplatform

        self.start()
        self._call("logging the final metrics", lambda: aiplatform.log_metrics(final_metrics(metrics)))
        self._call("ending the run", aiplatform.end_run)


def for_run(ctx) -> ExperimentLog | None:
    """The chief's ExperimentLog when --experiment is given, else None."""
    config = ctx.config
    if not (config.output.experiment and ctx.is_chief):
        return None
    project, region = location(ctx.environ)
    params = flatten(config.to_dict())
    # the resolved ones when the flags were left unset
    params["train.learning_rate"], params["train.layer_decay"] = ctx.learning_rate, ctx.layer_decay
    return ExperimentLog(
        config.output.experiment, run_name(ctx.paths.job_dir, config.output.experiment), project, region, params
    )


class ExperimentCallback(tf_keras.callbacks.Callback):
    """Each evaluation's val_* metrics as one time-series point. It reads them from the epoch
    logs, so it comes after the callback that evaluates (callbacks.EpochEvaluation)."""

    def __init__(self, experiment: ExperimentLog):
        super().__init__()
        self.experiment = experiment

    def on_epoch_end(self, epoch, logs=None):
        values = {k: float(v) for k, v in (logs or {}).items() if k.startswith("val_")}
        self.experiment.evaluation(epoch + 1, values)
