"""What a run may replace at --model-dir: nothing but an export of its own.

An export is written aside and moved into place (trainer.serving.export), which replaces the
directory that was there, every file in it. So the directory must hold nothing a user could
want: it is new or empty, or it is an export this package wrote, recognised by MARKER, holding
only the entries an export writes. Anything else (a folder of the user's, a file, the job dir,
a folder holding the run's inputs) is refused with one line, before the run reads anything.

An export of another run is a finished model someone may be using: MARKER names the job dir of
the run that wrote it, and a run replaces it only with --overwrite (issue 64, 1).
"""

import json
from collections.abc import Sequence

import trainer
from trainer import storage
from trainer.errors import UserError

# The file every export carries: "this directory is ours to replace".
MARKER = "trainer_export.json"
# Every entry an export (and its checked copies) writes at its top level.
ENTRIES = frozenset(
    {MARKER, "saved_model.pb", "fingerprint.pb", "variables", "assets", "precisions.json", "bfloat16", "int8"}
)


def write_marker(export_dir: str, job_dir: str | None = None) -> None:
    """Marks a directory as an export of this package, and of the training run in `job_dir`
    (None: made outside a run); written before the directory is moved into place."""
    storage.write_text_atomic(
        storage.join(export_dir, MARKER),
        json.dumps(
            {
                "written_by": "vertex-bert-trainer",
                "trainer_version": trainer.__version__,
                "job_dir": storage.normalized(job_dir) if job_dir else None,
            }
        )
        + "\n",
    )


def check_run_may_replace(model_dir: str, job_dir: str, overwrite: bool) -> None:
    """What a training run checks before anything is read: `model_dir` is replaceable, and what
    it holds is not another run's model, unless --overwrite. The job dir's own `model/` is the
    run's whichever run's marker it carries (a copied or moved job dir): jobdir.decide rules on
    replacing a finished run there."""
    check_replaceable(model_dir)
    if (
        overwrite
        or not storage.isdir(model_dir)
        or not storage.listdir(model_dir)
        or _same(model_dir, storage.join(job_dir, "model"))
    ):
        return
    writer = _writer(model_dir)
    if writer is not None and _same(writer, job_dir):
        return
    run = f"the run in {writer}" if writer else "another run (its trainer_export.json names no job dir)"
    raise UserError(
        f"--model-dir: {model_dir} holds the model exported by {run}; pass "
        f"--overwrite to replace it, or choose another --model-dir"
    )


def _writer(model_dir: str) -> str | None:
    """The job dir of the run that wrote the export at `model_dir`: its marker's; for an export
    from before the marker recorded it, the job dir it sits in (a config.json beside it); else
    None."""
    marker = storage.join(model_dir, MARKER)
    if storage.exists(marker):
        try:
            recorded = json.loads(storage.read_text(marker)).get("job_dir")
        except (ValueError, AttributeError):  # not this package's JSON: no run recorded
            recorded = None
        if recorded:
            return recorded
    parent = model_dir.rstrip("/").rpartition("/")[0]
    return parent if parent and storage.exists(storage.join(parent, "config.json")) else None


def _same(path: str, other: str) -> bool:
    return storage.normalized(path) == storage.normalized(other)


def check_replaceable(model_dir: str, flag: str = "--model-dir") -> None:
    """Refuses a `model_dir` whose replacement would delete what this package did not write."""
    if not storage.exists(model_dir):
        return
    if not storage.isdir(model_dir):
        raise UserError(
            f"{flag}: {model_dir} is a file; an export is a directory, and nothing "
            f"replaces a file it did not write. Choose a new or empty directory"
        )
    entries = sorted(name.rstrip("/") for name in storage.listdir(model_dir))
    foreign = [name for name in entries if name not in ENTRIES]
    if not entries:
        return
    if foreign or not _is_export(model_dir, entries):
        shown = ", ".join((foreign or entries)[:3]) + (", ..." if len(foreign or entries) > 3 else "")
        raise UserError(
            f"{flag}: {model_dir} holds files this trainer did not write ({shown}); "
            f"a run replaces only its own export there. Choose a new or empty "
            f"directory, or move those files"
        )


def _is_export(model_dir: str, entries: list) -> bool:
    """Marked; or unmarked but written by a version before the marker: a SavedModel at a job
    dir's default `model/`, beside the config.json of the run that wrote it."""
    if MARKER in entries:
        return True
    parent, _, name = model_dir.rstrip("/").rpartition("/")
    return (
        "saved_model.pb" in entries
        and name == "model"
        and bool(parent)
        and storage.exists(storage.join(parent, "config.json"))
    )


def check_apart(model_dir: str, others: Sequence[tuple[str, str]]) -> None:
    """Refuses a --model-dir that is, or contains, another path of the run ((flag, path) pairs:
    the job dir, checkpoints, TensorBoard logs, the caches and every input, globs included):
    replacing the export would delete it. Paths only; no file is read."""
    for flag, path in others:
        if path and _may_lie_within(path, model_dir):
            where = "is" if storage.normalized(path) == storage.normalized(model_dir) else "holds"
            raise UserError(
                f"--model-dir: {model_dir} {where} {flag} {path}; the export replaces "
                f"everything in --model-dir. Choose a directory of its own (by "
                f"default JOB_DIR/model)"
            )


def _may_lie_within(path: str, parent: str) -> bool:
    """Whether `path`, or a file its glob may match, is `parent` or lies under it: a match
    starts with the glob's part before its first wildcard."""
    cut = min([path.index(ch) for ch in "*?[" if ch in path], default=None)
    if cut is None:
        return storage.is_within(path, parent)
    prefix = storage.normalized(path[:cut] or ".")
    return (storage.normalized(parent) + "/").startswith(prefix) or storage.is_within(prefix, parent)
