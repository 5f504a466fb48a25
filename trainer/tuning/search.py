"""The local search's memory and its loop: an Optuna study in SEARCH_DIR/study.journal, asked for
each trial's values and told each trial's outcome.

Why Optuna: it is maintained, small beside our stack (numpy, PyYAML and tqdm we have; it adds
SQLAlchemy, Alembic, colorlog, none of which pins anything of ours), and it has the three things
this search needs. Its ask-and-tell interface lets a trial be a separate `trainer.task` process
(keras-tuner's oracles expect to build and fit a Keras model in this process). Its TPE sampler
is a Bayesian search, like Vertex's default algorithm, and its random sampler the baseline
(--sampler). And its JournalStorage keeps the study in one append-only local file, so a search
killed at any point reopens with everything it had asked and told, without a database.

Resuming: a killed search left its running trial RUNNING in the journal. The next run runs that
trial again first, with its own values and job dir (where the trainer resumes it from its last
checkpoint), then asks for new trials until the budget, which counts every trial in the journal.
Each run seeds its sampler with --seed plus the trials already in the journal: reruns are
reproducible, and a resumed random search does not repeat the values it started with.
"""

import contextlib
import dataclasses
import os
from collections.abc import Callable, Sequence

import optuna
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from trainer.errors import UserError
from trainer.training import lock
from trainer.tuning import space, trials

JOURNAL = "study.journal"
LOCK = "search.lock"
STUDY = "search"
# TPE models the results of the trials so far; before it has this many, it samples at random.
# Optuna's default, 10, would leave 2 of a default 12-trial budget to the model.
TPE_STARTUP_TRIALS = 4
SAMPLERS = ("tpe", "random")
# What a trial's state is called in trials.csv and the log.
STATES = {
    optuna.trial.TrialState.COMPLETE: "finished",
    optuna.trial.TrialState.FAIL: "failed",
    optuna.trial.TrialState.RUNNING: "running",
}


@dataclasses.dataclass(frozen=True)
class Record:
    """A trial as trials.csv and the log show it; `trial` counts from 1, as SEARCH_DIR/trials/N."""

    trial: int
    state: str
    flags: dict
    value: float | None
    seconds: float | None
    error: str


def records(study: optuna.Study, names: Sequence[str]) -> list:
    """Every trial of the study, in order, as Records."""
    return [
        Record(
            t.number + 1,
            STATES.get(t.state, t.state.name.lower()),
            flag_values(t.params, names),
            t.value,
            t.user_attrs.get("seconds"),
            t.user_attrs.get("error", ""),
        )
        for t in study.get_trials(deepcopy=False)
    ]


def distributions(names: Sequence[str]) -> dict:
    """The chosen part of trainer.tuning.space as Optuna distributions, keyed by flag name."""

    def distribution(dimension):
        if isinstance(dimension, space.Categorical):
            return optuna.distributions.CategoricalDistribution(dimension.values)
        return optuna.distributions.FloatDistribution(dimension.low, dimension.high, log=dimension.scale == "log")

    return {name: distribution(space.SPACE[name]) for name in names}


def flag_values(params: dict, names: Sequence[str]) -> dict:
    """A trial's values as the trainer gets them. Doubles keep 3 significant digits: a person
    reads and reruns the command, and finer steps than that do not change a training run."""
    return {name: f"{params[name]:.3g}" if isinstance(params[name], float) else str(params[name]) for name in names}


@contextlib.contextmanager
def locked(search_dir: str):
    """Holds SEARCH_DIR/search.lock while a search runs there: a second search in the same
    directory would take the first one's running trial for a killed one and run it too. The
    operating system releases the lock when the process ends, however it ends (trainer.training.lock,
    the job dir's lock too)."""
    held = lock.acquire(
        search_dir,
        LOCK,
        os.environ,
        lambda holder: (
            f"--job-dir: another trainer.tune is running a search in {search_dir}; wait for it, or "
            f"choose another --job-dir"
        ),
    )
    try:
        yield
    finally:
        held.release()


def open_study(search_dir: str, settings: dict, sampler: str, seed: int) -> optuna.Study:
    """The study in `search_dir`, created on the first run. `settings` (what the trials run and
    what they optimize) must be the ones it was created with: a search continued with other
    trainer flags would compare trials that are not comparable."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the search logs its own lines
    storage = JournalStorage(JournalFileBackend(os.path.join(search_dir, JOURNAL)))
    study = optuna.create_study(study_name=STUDY, storage=storage, load_if_exists=True, direction=settings["direction"])
    recorded = study.user_attrs.get("settings")
    if recorded is None:
        study.set_user_attr("settings", settings)
    elif recorded != settings:
        changed = [
            f"{key}: {recorded.get(key)!r} -> {settings.get(key)!r}"
            for key in sorted(set(recorded) | set(settings))
            if recorded.get(key) != settings.get(key)
        ]
        raise UserError(
            f"--job-dir: {search_dir} holds a search with other settings ({'; '.join(changed)}); "
            f"rerun it with the same flags to continue it, or choose another --job-dir"
        )
    study.sampler = make_sampler(sampler, seed + len(study.trials))
    return study


def make_sampler(name: str, seed: int) -> optuna.samplers.BaseSampler:
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    return optuna.samplers.TPESampler(seed=seed, n_startup_trials=TPE_STARTUP_TRIALS)


def run(
    study: optuna.Study,
    names: Sequence[str],
    budget: int,
    run_trial: Callable[[int, dict], trials.Outcome],
    after_trial: Callable[[int], None],
) -> None:
    """Finishes the trials a killed search left running, then runs new ones until the study
    holds `budget` trials. `run_trial(number, flag values)` runs one; `after_trial(number)`
    follows each one's outcome (trials.csv, the progress line)."""
    for left in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        # A handle on a trial that another process asked for: Trial's constructor takes its id.
        _finish(study, optuna.trial.Trial(study, left._trial_id), names, run_trial, after_trial)
    to_sample = distributions(names)
    while len(study.trials) < budget:
        _finish(study, study.ask(to_sample), names, run_trial, after_trial)


def _finish(study, trial: optuna.trial.Trial, names, run_trial, after_trial) -> None:
    outcome = run_trial(trial.number, flag_values(trial.params, names))
    trial.set_user_attr("seconds", round(outcome.seconds, 1))
    if outcome.value is None:
        trial.set_user_attr("error", outcome.error)
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
    else:
        study.tell(trial, outcome.value)
    after_trial(trial.number)
