"""The job directory: where a run's artifacts go, and whether this run is new, resumed or done.

    config.json  metrics.json  eval_history.csv  training.log  model/  tensorboard/  checkpoints/

metrics.json is written last: its presence means the run finished. Vertex restarts a preempted
replica with the same arguments, `--overwrite` included, so a run records the Vertex job id
(CLOUD_ML_JOB_ID) it belongs to in checkpoints/job.json: `--overwrite` replaces a finished run
or one from another job, never the checkpoints of the job that is running.

job.lock exists while a run owns the job dir (trainer.training.lock): a second run started there
is refused, naming the first.
"""

import contextlib
import dataclasses
import json
import os
import uuid
from collections.abc import Mapping

from trainer import config as config_lib
from trainer import storage
from trainer.config import Config
from trainer.errors import UserError
from trainer.training import lock

LOCK = "job.lock"
# What a run writes in its job dir before it reads any data: all that a refused run leaves.
_BEFORE_THE_DATA = ("config.json", "training.log")

NEW, RESUME, FINISHED = "new", "resume", "finished"


@dataclasses.dataclass(frozen=True)
class JobPaths:
    job_dir: str
    model_dir: str
    checkpoint_dir: str
    tensorboard_dir: str

    @classmethod
    def from_config(cls, config: Config) -> "JobPaths":
        out = config.output
        return cls(out.job_dir, out.model_dir, out.checkpoint_dir, out.tensorboard_dir)

    @property
    def config(self) -> str:
        return storage.join(self.job_dir, "config.json")

    @property
    def metrics(self) -> str:
        return storage.join(self.job_dir, "metrics.json")

    @property
    def history(self) -> str:
        return storage.join(self.job_dir, "eval_history.csv")

    @property
    def log(self) -> str:
        return storage.join(self.job_dir, "training.log")

    @property
    def token_cache(self) -> str:
        """Tokenized splits (trainer.data.token_cache), unless --cache-dir puts them elsewhere."""
        return storage.join(self.job_dir, "cache")

    @property
    def teacher_dir(self) -> str:
        """A --teacher model's outputs per text (trainer.training.teacher), kept across reruns."""
        return storage.join(self.job_dir, "teacher")

    @property
    def resume(self) -> str:
        """The last completed epoch's model, optimizer, dropout generators and epoch counter."""
        return storage.join(self.checkpoint_dir, "resume")

    @property
    def best(self) -> str:
        """The best epoch's weights: the ones exported."""
        return storage.join(self.checkpoint_dir, "best")

    @property
    def job(self) -> str:
        """The Vertex job this run belongs to."""
        return storage.join(self.checkpoint_dir, "job.json")


def check_writable(job_dir: str) -> None:
    """Fails with one line, before any data is read, when --job-dir cannot hold a run."""
    if storage.exists(job_dir) and not storage.isdir(job_dir):
        raise UserError(f"--job-dir: {job_dir} is a file, not a directory")
    probe = storage.join(job_dir, f".write-test-{uuid.uuid4().hex[:8]}")
    try:
        storage.write_text_atomic(probe, "")
        storage.remove(probe)
    except UserError:
        raise
    except Exception as error:  # OSError locally, tf.errors.* through gfile
        reason = getattr(error, "strerror", None) or getattr(error, "message", None) or error
        raise UserError(f"--job-dir: cannot write to {job_dir}: {reason}") from None


def new_directories(job_dir: str) -> list:
    """The job dir and those of its parents that do not exist yet, innermost first (local only:
    gs:// has no directories): what a run refused with an error line removes (remove_refused)."""
    if "://" in job_dir:
        return []
    created, path = [], os.path.abspath(job_dir)
    while not os.path.exists(path):
        created.append(path)
        path = os.path.dirname(path)
    return created


def remove_refused(created: list) -> None:
    """A command refused with an error line leaves no empty job dir behind (issue 64, low): in a
    job dir it created (`created`: new_directories before the run), holding nothing but what a
    run writes before it reads the data, those files go, and the directories it created. A job
    dir that existed keeps them (its training.log says how the run ended: why_unfinished), and
    one holding anything more (a token cache, a teacher's outputs, a lock) is kept whole."""
    if not created or not os.path.isdir(created[0]) or set(os.listdir(created[0])) - set(_BEFORE_THE_DATA):
        return
    for name in _BEFORE_THE_DATA:
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(created[0], name))
    for directory in created:
        try:
            os.rmdir(directory)
        except OSError:  # something else has come to live there meanwhile: it stays
            return


def take_ownership(paths: JobPaths, environ: Mapping[str, str]) -> lock.Held:
    """The job dir's lock for this run (the chief's), before anything there is read or removed."""

    def busy(holder: lock.Owner | None) -> str:
        who = f" ({holder.describe()})" if holder else ""
        return (
            f"--job-dir: {paths.job_dir} is in use by another trainer.task run{who}; wait for "
            f"it to finish, or choose another --job-dir"
        )

    return lock.acquire(paths.job_dir, LOCK, environ, busy)


def decide(config: Config, paths: JobPaths, job_id: str | None) -> str:
    """NEW, RESUME or FINISHED (this very Vertex job finished it already); refuses to clobber.

    Only a run with a resume checkpoint is resumed (and must be rerun with its own settings)."""
    same_job = job_id is not None and _recorded_job(paths) == job_id
    if storage.exists(paths.metrics) and not storage.exists(paths.config):
        raise UserError(
            f"--job-dir: {paths.job_dir} holds a metrics.json that no trainer.task "
            f"run wrote (it has no config.json); choose another --job-dir"
        )
    if storage.exists(paths.metrics):
        if same_job:
            return FINISHED
        if not config.output.overwrite and not holds_dry_run(paths):
            raise UserError(
                f"--job-dir: {paths.job_dir} holds a finished run ({paths.metrics}). "
                f"Pass --overwrite to replace it, or choose another --job-dir."
            )
        return NEW
    if not same_job and (config.output.overwrite or holds_dry_run(paths)):
        return NEW
    if storage.exists(paths.config) and has_resume_checkpoint(paths):
        previous = _resumable_settings(config_lib.load(paths.config))
        current = _resumable_settings(config)
        if previous != current:
            changed = _differences(previous, current)
            raise UserError(
                f"--job-dir: {paths.job_dir} holds an unfinished run with other "
                f"settings ({', '.join(changed[:4])}); rerun with the same flags to "
                f"resume it, or pass --overwrite to start over."
            )
        return RESUME
    return NEW


def holds_dry_run(paths: JobPaths) -> bool:
    """A --dry-run checks a command end to end: the real run in its job dir replaces what it
    left, finished or not, without --overwrite (issue #37, 10). config.json is the run's own,
    finished or not."""
    return storage.exists(paths.config) and config_lib.load(paths.config).train.dry_run


def why_unfinished(paths: JobPaths) -> str:
    """What a job dir without metrics.json holds, and what to do (trainer.report's refusal): a
    run still going, one to resume, or one that stopped before its first checkpoint with
    nothing to resume (issue #37, 16)."""
    owner = lock.running_owner(paths.job_dir, LOCK)
    if owner is not None:
        return f"a run is still going there ({owner.describe()}); wait for it to finish"
    if has_resume_checkpoint(paths):
        return "its run stopped before it finished; rerun the same trainer.task command to resume it"
    error = _last_error(paths)
    return (
        f"its run stopped before its first checkpoint{f' (it ended: {error})' if error else ''}, so "
        f"there is nothing to report or resume; rerun trainer.task"
    )


def _last_error(paths: JobPaths) -> str | None:
    """The `error:` line that ended the run, as training.log recorded it (runlog.RunLog)."""
    if not storage.exists(paths.log):
        return None
    errors = [line for line in storage.read_text(paths.log).splitlines() if line.startswith("error: ")]
    return errors[-1][len("error: ") :] if errors else None


def has_resume_checkpoint(paths: JobPaths) -> bool:
    """Whether an unfinished run saved anything to resume. One that stopped before its first
    checkpoint (a wrong column, a typo in a flag, Ctrl-C while tokenizing) left only config.json
    and training.log: its rerun, with corrected flags or not, is a new run (issue #23)."""
    return storage.exists(storage.join(paths.resume, "checkpoint"))


def start_new(paths: JobPaths, job_id: str | None) -> None:
    """Clears what a previous run left (its checkpoints, history, metrics) and records the job
    id. Only what runs write: a --checkpoint-dir of the user's may hold other files."""
    for stale in (paths.resume, paths.best, paths.job, paths.history, paths.metrics):
        if storage.exists(stale):
            storage.remove(stale)
    if job_id is not None:
        storage.write_text_atomic(paths.job, json.dumps({"vertex_job_id": job_id}) + "\n")


def drop_checkpoints(paths: JobPaths, keep: str) -> list:
    """After metrics.json: deletes what --keep-checkpoints does not keep; returns what it
    deleted. checkpoints/job.json stays: it tells a restarted Vertex replica its job finished."""
    doomed = {"all": [], "best": [paths.resume], "none": [paths.resume, paths.best]}[keep]
    removed = [path for path in doomed if storage.exists(path)]
    for path in removed:
        storage.remove(path)
    if keep == "none" and storage.isdir(paths.checkpoint_dir) and not storage.listdir(paths.checkpoint_dir):
        storage.remove(paths.checkpoint_dir)
    return removed


def _recorded_job(paths: JobPaths) -> str | None:
    if not storage.exists(paths.job):
        return None
    return json.loads(storage.read_text(paths.job)).get("vertex_job_id")


def _resumable_settings(config: Config) -> dict:
    """What must match for an unfinished run to be resumed rather than mixed with another."""
    values = config.to_dict()
    values["output"] = {}
    values["runtime"] = {k: v for k, v in values["runtime"].items() if k in ("sequence_padding", "static_shapes")}
    return values


def _differences(a: dict, b: dict, prefix="") -> list:
    out = []
    for key in sorted(set(a) | set(b)):
        if isinstance(a.get(key), dict) and isinstance(b.get(key), dict):
            out += _differences(a[key], b[key], prefix + key + ".")
        elif a.get(key) != b.get(key):
            out.append(f"{prefix}{key}: {a.get(key)!r} -> {b.get(key)!r}")
    return out
