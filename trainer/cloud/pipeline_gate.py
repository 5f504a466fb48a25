"""The pipeline's quality gate: `--gate "validation.accuracy>=0.5"`, checked on a run's metrics.json.

One module for the three places that need it: the command line checks the gate up front (its
shape, and that the run will have that split and metric), the pipeline's `evaluate` step reads
the value from metrics.json, and its `gate` step decides whether register and deploy run.
"""

import dataclasses
import math
import operator
import re

from trainer import config as config_lib
from trainer import task_registry
from trainer.errors import UserError

SPLITS = ("train", "validation", "test")
OPERATORS = {">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt}
# split.metric OP threshold; `>=` before `>` so that the longer operator wins.
_GATE = re.compile(r"^\s*([a-z_]+)\.([a-z0-9_]+)\s*(>=|<=|>|<)\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$")
EXAMPLE = "validation.accuracy>=0.5"


class GateNotMet(UserError):
    """The model's metric is on the wrong side of the threshold: exit code 1, the command was fine."""

    exit_code = 1


@dataclasses.dataclass(frozen=True)
class Gate:
    split: str
    metric: str
    op: str
    threshold: float

    @property
    def name(self) -> str:
        return f"{self.split}.{self.metric}"

    def __str__(self) -> str:
        return f"{self.name}{self.op}{self.threshold:g}"

    def passes(self, value: float) -> bool:
        return OPERATORS[self.op](value, self.threshold)

    def verdict(self, value: float) -> str:
        """One line for people, naming the metric, its value and the threshold."""
        if self.passes(value):
            return f"gate {self}: passed: {self.name} is {value:.4g} ({self.op} {self.threshold:g})"
        return (
            f"gate {self}: not met: {self.name} is {value:.4g}, not {self.op} the threshold "
            f"{self.threshold:g}; register and deploy did not run"
        )

    def value_in(self, metrics: dict, source: str) -> float:
        """The gated number in a run's metrics.json content; `source` names the file in messages."""
        split = metrics.get(self.split)
        if not isinstance(split, dict):
            raise UserError(f"--gate {self}: {source} has no {self.split} split")
        if self.metric not in split:
            numbers = sorted(k for k, v in split.items() if k != "examples" and isinstance(v, (int, float)))
            raise UserError(
                f"--gate {self}: {source} has no {self.name}; its {self.split} metrics: {', '.join(numbers)}"
            )
        value = split[self.metric]
        # metrics.json writes a non-finite number as null (trainer/strict_json.py).
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise GateNotMet(
                f"gate {self}: not met: {self.name} is {value!r} in {source}, not a "
                f"finite number; register and deploy did not run"
            )
        return float(value)


def parse(text: str) -> Gate:
    """`validation.accuracy>=0.5` -> Gate; a malformed one is a UserError naming --gate."""
    match = _GATE.match(text or "")
    if not match:
        raise UserError(
            f"--gate: expected SPLIT.METRIC OP THRESHOLD with OP one of "
            f"{', '.join(OPERATORS)} (e.g. {EXAMPLE!r}), got {text!r}"
        )
    split, metric, op, threshold = match.groups()
    if split not in SPLITS:
        raise UserError(f"--gate {text}: unknown split {split!r}; one of {', '.join(SPLITS)}")
    return Gate(split, metric, op, float(threshold))


def task_metrics(task) -> tuple:
    """The metrics metrics.json holds for every split of a `task` run: the selection metrics'
    names without their `val_` prefix (the task's metric_goals)."""
    return tuple(sorted(name.removeprefix("val_") for name in task.metric_goals))


def check_against(gate: Gate, trainer_config: config_lib.Config) -> None:
    """Up front, before training: the run must compute the gated split and metric."""
    task = task_registry.from_config(trainer_config)
    known = task_metrics(task)
    if gate.metric not in known:
        raise UserError(
            f"--gate {gate}: unknown metric {gate.metric!r} for a {task.name} run; one of {', '.join(known)}"
        )
    data = trainer_config.data
    # The packaged sample has a test file; data of one's own has a test split only with one.
    if gate.split == "test" and data.training_file is not None and data.testing_file is None:
        raise UserError(
            f"--gate {gate}: the run has no test split; pass the trainer --testing-file or gate on validation"
        )
