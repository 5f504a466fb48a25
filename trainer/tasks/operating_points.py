"""The words both tasks with yes/no decisions (classification, multi-label) use for a chosen
operating point (--target-precision/--target-recall, trainer.training.operating_point), so the
model card and report.html say them alike."""


def wanted(point: dict) -> str:
    """The target as the user asked for it, flag included."""
    return f"{point['target']} >= {point['value']:g} (--target-{point['target']} {point['value']:g})"


def rate(value) -> str:
    """A precision or recall of metrics.json (None where it had no rows) for a sentence."""
    return "-" if value is None else f"{value:.3f}"
