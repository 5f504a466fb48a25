"""The local search from start to summary: the study (search.py) asks, each trial runs as a
trainer process (trials.py), and people follow it in the log and trials.csv (summary.py).

Exit status: 0 when at least one trial finished, 1 when every trial failed (each one's reason
is in trials.csv and its stderr.txt).
"""

import logging
import os

from trainer import cli, config
from trainer.errors import UserError
from trainer.tuning import finish, search, summary, trials

log = logging.getLogger("trainer")


def trial_dir(search_dir: str, trial: int) -> str:
    return os.path.join(search_dir, "trials", str(trial))


def opening_line(records: list, search_dir: str, budget: int, settings: dict, sampler: str) -> str:
    """`search in DIR: 3 of 12 trials done, 1 stopped mid-way to run again; maximize ...`."""
    stopped = sum(r.state == "running" for r in records)
    again = f", {stopped} stopped mid-way to run again" if stopped else ""
    return (
        f"search in {search_dir}: {len(records) - stopped} of {budget} trials done{again}; "
        f"{settings['direction']} {settings['metric']} over {','.join(settings['parameters'])} "
        f"({sampler} sampler)"
    )


def run(
    search_dir: str,
    settings: dict,
    budget: int,
    sampler: str,
    seed: int,
    cache_dir: str | None,
    finish_best: config.Config | None = None,
) -> int:
    """Runs the search in `search_dir` up to `budget` trials; `cache_dir` None: the trainer
    flags in `settings` name the token cache already. `finish_best`: the trainer flags' config,
    when the best trial is to be finished (finish.py), still under the search's lock."""
    names, metric, direction = settings["parameters"], settings["metric"], settings["direction"]
    csv_path = os.path.join(search_dir, summary.CSV)
    with search.locked(search_dir):
        _check_no_stray_trials(search_dir)
        study = search.open_study(search_dir, settings, sampler, seed)
        log.info(opening_line(search.records(study, names), search_dir, budget, settings, sampler))

        def run_trial(number: int, flags: dict) -> trials.Outcome:
            job_dir = trial_dir(search_dir, number + 1)
            log.info(summary.started_line(number + 1, budget, flags, os.path.join(job_dir, "training.log")))
            command = trials.trainer_command(settings["trainer_args"], flags, job_dir, cache_dir)
            return trials.run(command, job_dir, metric)

        def after_trial(number: int) -> None:
            records = search.records(study, names)
            summary.write_csv(csv_path, records, names, metric)
            log.info(summary.finished_line(records[number], records, budget, metric, direction))

        search.run(study, names, budget, run_trial, after_trial)
        records = search.records(study, names)
        for line in summary.summary_lines(records, search_dir, metric, direction):
            log.info(line)
        top = summary.best(records, direction)
        if top is None:
            cli.fail(f"every trial failed; the last line each printed on stderr is in {csv_path}")
            return 1
        failures = finish.finish(trial_dir(search_dir, top.trial), top.trial, finish_best) if finish_best else []
    log.info("the best trial's flags, as a command:")
    print(summary.best_command(settings["trainer_args"], top.flags), flush=True)
    if failures:
        cli.fail(f"--finish-best: {'; '.join(failures)}; rerun the same command to finish it")
        return 1
    return 0


def _check_no_stray_trials(search_dir: str) -> None:
    """A new study beside trials/ of another search (its study.journal deleted) would take that
    search's finished trials for its own: trials/1/metrics.json is read, not rerun."""
    trials_root = os.path.dirname(trial_dir(search_dir, 1))
    if (
        not os.path.exists(os.path.join(search_dir, search.JOURNAL))
        and os.path.isdir(trials_root)
        and os.listdir(trials_root)
    ):
        raise UserError(
            f"--job-dir: {search_dir} holds trials/ of a search whose {search.JOURNAL} "
            f"is gone; choose another --job-dir, or delete {trials_root}"
        )
