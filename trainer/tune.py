"""`python -m trainer.tune [flags] -- [trainer flags]`: a hyperparameter search on this machine.

The local twin of `trainer.submit tune`: the same search space (trainer/tuning/space.py), the
same flag names (--max-trial-count, --parameters, --job-dir) and the same objective, the
trainer's --selection-metric. Each trial is a `python -m trainer.task` process with the trial's
values and the flags after `--`, in SEARCH_DIR/trials/N; all trials share one token cache
(SEARCH_DIR/cache, unless --cache-dir is among the trainer flags), so the data is tokenized once.
The search is Optuna's TPE or random sampler, over a study kept in SEARCH_DIR/study.journal
(trainer/tuning/search.py says why Optuna). Rerunning the same command continues a killed search
and only prints the summary of a finished one. Trials skip what the search never reads (the
bfloat16 and int8 copies, the report: trainer/tuning/trials.py); --finish-best writes them for
the best trial at the end (trainer/tuning/finish.py).
"""

import contextlib
import datetime
import os
import signal
import sys
from collections.abc import Sequence

import trainer.tasks  # noqa: F401  (registers the task kinds: trainer/task_registry.py)
from trainer import cli, config, task_registry
from trainer.errors import UserError
from trainer.tuning import space

# Flags a search sets for every trial itself: each trial writes under SEARCH_DIR/trials/N.
PER_TRIAL_FLAGS = ("--job-dir", "--model-dir", "--checkpoint-dir", "--tensorboard-dir")


def build_arg_parser() -> cli.ArgumentParser:
    parser = cli.ArgumentParser(
        prog="python -m trainer.tune",
        description="Search hyperparameters on this machine: each trial runs `python -m "
        "trainer.task` with the trial's values and the arguments after `--`, and "
        "the search maximizes (or minimizes) the trainer's --selection-metric. "
        "Rerun the same command to continue a killed search.",
        allow_abbrev=False,
    )
    parser.add_argument(
        "--job-dir",
        help="The search's directory, local: trials.csv, the study, "
        "trials/N (each trial's job dir), cache/ (default: "
        "runs/tune-TIMESTAMP).",
    )
    parser.add_argument(
        "--max-trial-count",
        type=int,
        default=12,
        help="Trials in all, those of earlier runs of this search included (default: 12).",
    )
    parser.add_argument(
        "--parameters",
        default=",".join(space.TUNED_FLAGS),
        help=f"Comma-separated flags to tune (default: all of {','.join(space.TUNED_FLAGS)}).",
    )
    parser.add_argument(
        "--sampler",
        choices=("tpe", "random"),
        default="tpe",
        help="'tpe': Bayesian (Optuna's Tree-structured Parzen Estimator, random for "
        "the first 4 trials); 'random': uniform on each parameter's scale "
        "(default: tpe).",
    )
    parser.add_argument("--seed", type=int, default=42, help="Seed of the sampler (default: 42).")
    parser.add_argument(
        "--finish-best",
        action="store_true",
        help="After the search, give the best trial what every trial skips: its "
        "report (report.html, errors.csv, MODEL_CARD.md) and the bfloat16 "
        "and int8 copies the trainer flags ask for, as `python -m "
        "trainer.task` writes them. Trials write only their float32 model "
        "and metrics.json, the search reads nothing else.",
    )
    return parser


def parse_args(argv: Sequence[str]) -> tuple:
    """(options, trainer args): everything after the first `--` belongs to the trainer."""
    argv = list(argv)
    split = argv.index("--") if "--" in argv else len(argv)
    return build_arg_parser().parse_args(argv[:split]), argv[split + 1 :]


def check_trainer_args(trainer_args: Sequence[str], tuned: Sequence[str]) -> config.Config:
    """The trainer flags, parsed and validated by the trainer's own parser before any trial."""
    given = space.given_flags(trainer_args)
    for flag in PER_TRIAL_FLAGS:
        if flag in given:
            raise UserError(
                f"{flag} is not a trainer argument in a search: every trial writes its "
                f"own under SEARCH_DIR/trials/N; give the search's directory as "
                f"--job-dir before the `--`"
            )
    space.check_untuned(trainer_args, tuned, "the search", "--parameters")
    return config.build_config(list(trainer_args), environ={})


def search_dir_of(job_dir: str | None, now: datetime.datetime) -> str:
    """--job-dir, which must be local: the study's journal is locked with the file system's locks."""
    if job_dir is None:
        return os.path.join("runs", f"tune-{now:%Y%m%d-%H%M%S}")
    if "://" in job_dir:
        raise UserError(f"--job-dir: a local search keeps its study in a local directory; got {job_dir!r}")
    return job_dir


def settings_of(trainer_args: Sequence[str], tuned: Sequence[str], metric: str) -> dict:
    """What a continued search must share with the one it continues (JSON values, as stored)."""
    return {
        "trainer_args": list(trainer_args),
        "parameters": list(tuned),
        "metric": metric,
        "direction": task_registry.metric_goals()[metric],
    }


def main(argv: Sequence[str], now: datetime.datetime | None = None) -> int:
    options, trainer_args = parse_args(argv)
    if options.max_trial_count < 1:
        raise UserError(f"--max-trial-count: must be >= 1, got {options.max_trial_count}")
    tuned = space.chosen(options.parameters)
    trainer_config = check_trainer_args(trainer_args, tuned)
    search_dir = search_dir_of(options.job_dir, now or datetime.datetime.now())
    try:
        os.makedirs(search_dir, exist_ok=True)
    except OSError as error:
        raise UserError(f"--job-dir: cannot create {search_dir}: {error.strerror}") from None
    cli.setup_logging()
    # Optuna takes a second to import: only now, so --help and flag errors answer at once.
    from trainer.tuning import runner

    settings = settings_of(trainer_args, tuned, trainer_config.train.selection_metric)
    cache_dir = None if trainer_config.output.cache_dir else os.path.join(search_dir, "cache")
    with sigterm_stops_the_search():
        return runner.run(
            search_dir,
            settings,
            options.max_trial_count,
            options.sampler,
            options.seed,
            cache_dir,
            trainer_config if options.finish_best else None,
        )


@contextlib.contextmanager
def sigterm_stops_the_search():
    """While the search runs, SIGTERM (`kill`, a job scheduler) stops it as Ctrl-C does: the
    running trial is ended and kept to run again, and the exit status is 130. Python's default
    ends the search at once, without that line, and its trial only where the search's death
    reaches it (Linux, trials.py). Installed here, not at import: tests run main in-process."""

    def stop(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(
        cli.run(
            main,
            interrupted="stopped; rerun the same command to continue the search "
            "(finished trials are kept, the stopped one runs again)",
        )
    )
