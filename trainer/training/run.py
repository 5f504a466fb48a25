"""One training run: a validated config in, every artifact in the job directory out.

The run is a list of stages over one `RunContext` (trainer.training.context); each stage is a
function in trainer.training.stages, .fitting or .results and can be called on its own.
"""

import json
import logging
import signal
import threading
import time
from collections.abc import Mapping, Sequence

from trainer import cli, storage
from trainer.config import Config
from trainer.errors import UserError
from trainer.training import (
    fitting,
    held_out,
    jobdir,
    label_issues,
    operating_point,
    results,
    stages,
    task_flags,
    teacher,
    zero_shot,
)
from trainer.training.context import RunContext
from trainer.vertex import environment as vertex

log = logging.getLogger("trainer")

STAGES = (
    stages.check_inputs,  # job dir writable, encoder files parse: before anything is read
    stages.prepare_job_dir,  # new, resumed or finished; config.json, training.log
    stages.load_data,  # read and validate every split
    stages.resolve_runtime,  # devices -> strategy, precision, XLA, padding
    task_flags.check_task_flags,  # --target-*, --find-label-issues fit the task and runtime
    teacher.teach,  # with a teacher: its outputs packed with the training labels
    held_out.check_containment,  # held-out texts inside training texts: counted, warned
    stages.load_encoder,
    stages.tokenize,
    stages.build_model,  # classifier, optimizer, resume checkpoint
    zero_shot.measure,  # validation before training, for a kind whose untrained model means something
    fitting.fit,
    results.evaluate,  # validation and test predicted once; the temperature fitted
    operating_point.choose_operating_point,  # --target-precision/--target-recall thresholds
    results.summarize,  # each split's metrics at the export's decisions, logged
    results.export,  # calibrated, float32
    results.export_bfloat16,  # MODEL_DIR/bfloat16, if it agrees with float32
    results.export_int8,  # MODEL_DIR/int8, likewise
    results.export_onnx,  # MODEL_DIR/onnx, its tokenizer beside: no TensorFlow to serve it
    results.export_onnx_int8,  # MODEL_DIR/onnx-int8, quantized from MODEL_DIR/onnx
    label_issues.find_label_issues,  # label_issues.csv (validation; train with --find-label-issues)
    results.report,  # report.html, figures, errors.csv, MODEL_CARD.md
    results.write_artifacts,  # metrics.json last: the run is finished
)


class Interrupted(UserError):
    """Ctrl-C (exit 130) or SIGTERM (143, how Vertex preempts): the message says whether a rerun
    resumes or starts over."""

    def __init__(self, message: str, exit_code: int = 130):
        super().__init__(message)
        self.exit_code = exit_code


def run(config: Config, environ: Mapping[str, str], ignored_arguments: Sequence[str] = ()) -> dict:
    """Runs every stage; returns metrics.json's content.

    `ignored_arguments`: what the flag parser tolerated inside a Vertex job, for the job's log.
    """
    _, _, is_chief = vertex.task_role(vertex.read_environment(environ).cluster)
    ctx = RunContext(
        config, environ, jobdir.JobPaths.from_config(config), is_chief, ignored_arguments=tuple(ignored_arguments)
    )
    end = _Ending(ctx)
    created = jobdir.new_directories(config.output.job_dir) if is_chief else []
    with cli.ends_soon_after_a_signal(end.last_words):
        try:
            for stage in STAGES:
                start = time.perf_counter()
                stage(ctx)
                ctx.durations[stage.__name__] = time.perf_counter() - start
                if ctx.state == jobdir.FINISHED:
                    return _finished_metrics(ctx)
            return ctx.metrics
        except KeyboardInterrupt as stop:
            interrupted = _interrupted(ctx, isinstance(stop, cli.Terminated))
            end(interrupted)
            raise interrupted from None
        except UserError as error:
            end(error)
            jobdir.remove_refused(created)
            raise
        finally:
            end()


class _Ending:
    """How a run ends, once, whichever thread gets there first: the run's own, or cli's watcher
    after a signal the run could not answer in time (a long step inside TensorFlow, issue 64,
    9). The error is recorded in training.log, the log closed (and copied to a gs:// job dir),
    the job dir's lock released."""

    def __init__(self, ctx: RunContext):
        self._ctx, self._once, self._ended = ctx, threading.Lock(), False

    def __call__(self, error: UserError | None = None) -> None:
        with self._once:
            if self._ended:
                return
            self._ended = True
            run_log, held = self._ctx.run_log, self._ctx.lock
            if run_log is not None:
                if error is not None:
                    run_log.record_error(str(error))
                run_log.close()
            if held is not None:
                held.release()

    def last_words(self, signum: int) -> str:
        """The watcher's: the line the run would have ended with, once recorded and released."""
        interrupted = _interrupted(self._ctx, signum == signal.SIGTERM)
        self(interrupted)
        return str(interrupted)


def _interrupted(ctx: RunContext, terminated: bool) -> Interrupted:
    message = _interrupted_message(ctx)
    if terminated:
        return Interrupted(message.replace("interrupted", "terminated (SIGTERM)", 1), cli.Terminated.exit_code)
    return Interrupted(message)


def _finished_metrics(ctx: RunContext) -> dict:
    return json.loads(storage.read_text(ctx.paths.metrics))


def _interrupted_message(ctx: RunContext) -> str:
    done = ctx.trainable.epoch_counter.numpy() if ctx.trainable is not None else 0
    if done or (ctx.state == jobdir.RESUME and storage.exists(ctx.paths.resume)):
        return "interrupted; rerun the same command to resume after the last completed epoch" + (
            f" ({int(done)})" if done else ""
        )
    return "interrupted before the first epoch finished; rerunning the same command starts over"
