"""Where the package asks for a task kind (--task): the registry the kinds register into.

The kinds live in trainer/tasks/ (one folder each), on a floor above the data, modeling,
inference and serving code they compose; the config, the data's preparation and the loaders of
an export, below them, ask this registry instead, by name (--task, metrics.json's `task`) or by
an export's outputs. `import trainer.tasks` registers the kinds, in --task's order: every entry
point (trainer/task.py and the rest) does it first, as Model Garden's
official/common/registry_imports.py does for its tasks.

Nothing here names a kind: a kind is what `register` was given (trainer/tasks/base.py's Task).
"""

AUTO = "auto"  # --task's value when the data decides (auto_task)

_KINDS: list = []


def register(kind) -> None:
    """Add a kind (a Task class) after those registered before it; the first registered is what
    --task auto trains on a file no other kind claims."""
    if any(known.name == kind.name for known in _KINDS):
        raise ValueError(f"a task kind named {kind.name!r} is already registered")
    _KINDS.append(kind)


def kinds() -> tuple:
    """The registered kinds, in --task's order."""
    if not _KINDS:
        raise RuntimeError("no task kind is registered: `import trainer.tasks` first (the entry points do)")
    return tuple(_KINDS)


def names() -> tuple:
    return tuple(kind.name for kind in kinds())


def choices() -> tuple:
    """--task's choices."""
    return (AUTO, *names())


def metric_goals() -> dict:
    """Every validation metric some kind can select the best epoch by, with its direction: early
    stopping, the exported weights and Vertex hyperparameter tuning (trainer.submit's metric
    spec, the trainer's reports, trainer.tune's study) all read this one table."""
    return {
        metric: goal for kind in kinds() for variant in kind.variants() for metric, goal in variant.metric_goals.items()
    }


def losses() -> tuple:
    """--loss's choices: auto, then each kind's own objectives (Task.losses)."""
    return (AUTO, *dict.fromkeys(loss for kind in kinds() for loss in kind.losses))


def _kind(name: str | None):
    """The kind (a Task class) of a task name (--task's value, or metrics.json's `task`; None:
    a run from before there were other tasks than classification)."""
    if name in (None, AUTO):
        return kinds()[0]
    return {kind.name: kind for kind in kinds()}[name]


def by_name(name: str | None):
    """A fresh task object of a task name, at its default settings."""
    return _kind(name)()


def default_metric() -> str:
    """--selection-metric of --task auto (each task's own default replaces it: config's
    _apply_task_defaults), and the metric a tuning job's trials report by default."""
    return by_name(AUTO).default_metric


def auto_task(training_file: str | None) -> str | None:
    """The name of the kind --task auto trains on `training_file` when a kind claims it (tagged
    sentences), else None: the first kind's, as ever."""
    if not training_file:
        return None
    return next((kind.name for kind in kinds()[1:] if kind.claims(training_file)), None)


def settle(config) -> None:
    """Lets the run's kind decide the flags it leaves to its data (Task.settle), once, as the
    config is built."""
    _kind(config.model.task).settle(config)


def from_config(config):
    """The task object of a run (--task, 'auto' resolved), as its training flags make it."""
    return _kind(config.model.task).with_settings(vars(config.train))


def of_run(metrics: dict):
    """The task object of a finished run (metrics.json): its kind, as its training flags
    (`hyperparameters`) made it."""
    return _kind(metrics.get("task")).with_settings(metrics.get("hyperparameters", {}))


def of_export(output_names):
    """A fresh task object of a loaded export whose signature returns `output_names`: the kind
    that recognizes them (Task.recognizes, its export_mark). An export none recognizes is
    classification's, as by_name(None): the only kind of the earliest exports."""
    return next((kind for kind in kinds() if kind.recognizes(output_names)), kinds()[0])()


def of_onnx_copy(path: str):
    """A fresh task object of the ONNX copy in `path`: the kind whose unit's side files are
    there (a tagger's tagging.json), else the first kind's (the copies of texts have none)."""
    from trainer import storage

    def wrote(kind) -> bool:
        sidecars = kind.unit.onnx_sidecars
        return bool(sidecars) and all(storage.exists(storage.join(path, name)) for name in sidecars)

    return next((kind for kind in kinds() if wrote(kind)), kinds()[0])()
