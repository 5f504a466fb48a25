"""The hyperparameter search space: which trainer flags are tuned, over which values.

Plain data, read by both searches, so they cannot search different spaces: `trainer.submit tune`
turns it into Vertex AI's parameter specs (trainer/cloud/submission.py) and `trainer.tune` into Optuna
distributions (trainer/tuning/search.py). The ids are flag names without their dashes: Vertex
passes a trial's values as `--learning-rate=0.0001`, and the local search passes them the same
way, so each id must be a flag `trainer.task` accepts (tests/cloud/test_submit.py checks it).
"""

import dataclasses
from collections.abc import Sequence

from trainer.errors import UserError


@dataclasses.dataclass(frozen=True)
class Double:
    """A real value in [low, high], searched uniformly on `scale`: "log" or "linear"."""

    low: float
    high: float
    scale: str


@dataclasses.dataclass(frozen=True)
class Categorical:
    """One of `values`, passed to the trainer verbatim.

    Integer-valued flags are categorical: Vertex formats DISCRETE values as floats on the command
    line ("--batch-size=32.0", which the trainer accepts but a user reading the trial's command
    would not expect), while CATEGORICAL values are passed as written here.
    """

    values: tuple


SPACE = {
    "learning-rate": Double(1e-5, 5e-4, "log"),
    "batch-size": Categorical(("16", "32", "64")),
    "dropout": Double(0.0, 0.3, "linear"),
    "warmup-fraction": Double(0.0, 0.2, "linear"),
    "weight-decay": Double(0.0, 0.1, "linear"),
    "layer-decay": Double(0.7, 1.0, "linear"),
    "epochs": Categorical(("2", "3", "4", "6")),
}
TUNED_FLAGS = tuple(SPACE)


def chosen(parameters: str) -> tuple:
    """--parameters ("learning-rate,dropout", leading dashes allowed) as names, in the order given."""
    names = tuple(n.strip().removeprefix("--") for n in parameters.split(",") if n.strip())
    unknown = [n for n in names if n not in SPACE]
    if unknown or not names:
        raise UserError(
            f"--parameters: expected a comma-separated subset of {','.join(TUNED_FLAGS)}, got {parameters!r}"
        )
    return names


def given_flags(trainer_args: Sequence[str]) -> list:
    """The flags among trainer arguments, without their values: ["--epochs", "--job-dir", ...]."""
    return [arg.split("=", 1)[0] for arg in trainer_args if arg.startswith("--")]


def check_untuned(trainer_args: Sequence[str], tuned: Sequence[str], setter: str, parameters: str) -> None:
    """A tuned flag among the trainer arguments would fight the search's value: refuse it, naming
    who sets it (`setter`) and how the user spells the parameter list (`parameters`)."""
    given = given_flags(trainer_args)
    for name in tuned:
        if "--" + name in given:
            raise UserError(
                f"--{name} is tuned: {setter} sets it in every trial; drop it from the "
                f"trainer arguments or leave it out of {parameters}"
            )
