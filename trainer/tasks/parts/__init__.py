"""The optional parts of a task kind: what some kinds can do and others cannot. Each is an
attribute of the kind's object, an object of the part's class (the kind's own subclass, in the
kind's folder), or None when the kind cannot do it:

- `operating_point` (threshold.py): --target-precision/--target-recall, a threshold per yes/no
  decision chosen on validation;
- `calibration` (temperature.py): a temperature fitted on validation rescales the probabilities;
- `label_issues` (label_quality.py): cleanlab's ranking of doubtful labels (label_issues.csv,
  --find-label-issues);
- `explanations` (attribution.py): token attributions (trainer.explain, the server's
  {"explain": true}, report.html's coloured rows);
- `distillation` (teacher_targets.py): learning from a teacher's outputs (--teacher,
  --teacher-probabilities).

A caller asks `task.<part> is None`, or `task.<part>.<method>(...)`: a kind's type says nothing of
what it can do. A flag or request that needs a part the kind lacks is refused here, in one
sentence built from the absence (`refusal`, `require`), so no kind writes its own refusals.
"""

from trainer.errors import UserError

# {part: (what a flag or request that needs it needs, what a kind without it lacks)}: the two
# halves of every refusal's line. Calibration refuses nothing: --calibrate is on by default and
# means nothing for a kind without it.
NEEDS = {
    "operating_point": ("a binary or multi-label task", "has no yes/no decision a threshold can move"),
    "label_issues": ("classes or labels", "has no class or label per row for cleanlab's ranking to judge"),
    "explanations": (
        "a model answering for a whole text",
        "has no answer for a whole text to attribute to its words",
    ),
    "distillation": ("a kind that learns from a teacher's outputs", "has no loss over a teacher's outputs"),
}


def refusal(task, part: str, flag: str, why: str | None = None) -> str:
    """The one error line (without `error: `) refusing `flag` (a flag, or what a request asked
    for) because `task` has no `part`: what the flag needs, then the task by its --task name and
    what it lacks; or, given `why`, why this model's part cannot serve it (a classifier of three
    classes has an operating point, but no threshold between two)."""
    needs, lacks = NEEDS[part]
    return f"{flag}: needs {needs}; {why or f'--task {task.name} {lacks}'}"


def require(task, part: str, flag: str):
    """`task`'s `part`, or a UserError with refusal's line when it has none."""
    found = getattr(task, part)
    if found is None:
        raise UserError(refusal(task, part, flag))
    return found
