"""What the search tells people: a line per trial started and finished (with the best so far and
an ETA), SEARCH_DIR/trials.csv after every trial, and at the end the best trial as a command.

Plain functions of the trials' records (search.Record), in the trainer's progress style: two
spaces between fields, durations as 1m05s (trainer.progress.clock).
"""

import csv
import io
import os
import shlex
import tempfile
from collections.abc import Sequence

from trainer.progress import clock

CSV = "trials.csv"


def best(records: Sequence, direction: str):
    """The finished trial with the best value (the first of equals), or None."""
    finished = [r for r in records if r.value is not None]
    if not finished:
        return None
    pick = max if direction == "maximize" else min
    return pick(finished, key=lambda r: r.value)


def started_line(trial: int, budget: int, flags: dict, log_path: str) -> str:
    return f"trial {trial}/{budget}  started  {_flags_text(flags)}  (log: {log_path})"


def finished_line(record, records: Sequence, budget: int, metric: str, direction: str) -> str:
    """`trial 3/12  finished in 41s  val_macro_f1 0.8123  best 0.8345 (trial 2)  ETA 6m09s`."""
    if record.value is None:
        outcome = f"failed in {clock(record.seconds or 0)}: {record.error}"
    else:
        outcome = f"finished in {clock(record.seconds or 0)}  {metric} {record.value:.4f}"
    top = best(records, direction)
    fields = [
        f"trial {record.trial}/{budget}",
        outcome,
        f"best {top.value:.4f} (trial {top.trial})" if top else "no trial finished yet",
    ]
    left = eta(records, budget)
    if left is not None:
        fields.append(f"ETA {clock(left)}")
    return "  ".join(fields)


def eta(records: Sequence, budget: int) -> float | None:
    """Seconds for the trials still to run, at the mean duration of those that ran (None: no
    trial left, or none timed yet)."""
    timed = [r.seconds for r in records if r.state != "running" and r.seconds]
    left = budget - sum(r.state != "running" for r in records)
    if left <= 0 or not timed:
        return None
    return left * sum(timed) / len(timed)


def best_command(trainer_args: Sequence[str], flags: dict) -> str:
    """The best trial as a command line to paste: the user's trainer flags and the trial's
    values (its job dir is left to choose, like any new run's)."""
    tuned = [part for name, value in flags.items() for part in (f"--{name}", value)]
    return shlex.join(["python", "-m", "trainer.task", *trainer_args, *tuned])


def summary_lines(records: Sequence, search_dir: str, metric: str, direction: str) -> list:
    """The closing lines: counts, where trials.csv is, the best trial and its directory."""
    counts = {state: sum(r.state == state for r in records) for state in ("finished", "failed", "running")}
    told = ", ".join(f"{n} {state}" for state, n in counts.items() if n)
    lines = [
        f"search: {len(records)} trials in {search_dir} ({told}); every trial's outcome in "
        f"{os.path.join(search_dir, CSV)}"
    ]
    top = best(records, direction)
    if top:
        lines.append(
            f"best: trial {top.trial}, {metric} {top.value:.4f} ({direction}d), "
            f"its run in {os.path.join(search_dir, 'trials', str(top.trial))}"
        )
    return lines


def write_csv(path: str, records: Sequence, names: Sequence[str], metric: str) -> None:
    """trials.csv: trial, state, each tuned flag, the metric, seconds, error; replaced whole
    (temporary file + rename) so that a reader never sees half of it. The search never loads
    TensorFlow (its trials do), so it writes with os, not trainer.storage's gfile."""
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(["trial", "state", *names, metric, "seconds", "error"])
    for r in records:
        writer.writerow(
            [
                r.trial,
                r.state,
                *(r.flags.get(n, "") for n in names),
                "" if r.value is None else repr(r.value),
                "" if r.seconds is None else r.seconds,
                r.error,
            ]
        )
    directory = os.path.dirname(path) or "."
    with tempfile.NamedTemporaryFile(
        "w", dir=directory, prefix=f".{CSV}.", delete=False, encoding="utf-8", newline=""
    ) as tmp:
        tmp.write(text.getvalue())
    os.chmod(tmp.name, 0o644)
    os.replace(tmp.name, path)


def _flags_text(flags: dict) -> str:
    return " ".join(f"--{name}={value}" for name, value in flags.items())
