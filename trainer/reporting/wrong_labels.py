"""report.html's "Labels that look wrong" section: the top rows of label_issues.csv
(trainer.training.label_issues), read back from the job dir so that `trainer.report` on a
finished run shows them too."""

import io

import pandas as pd

from trainer import storage

SHOWN = 20  # rows in the report; the CSV holds every flagged row


def section(job_dir: str, metrics: dict) -> dict | None:
    """{"rows", "total", "columns", "splits", "folds", "file", "warning"} for the template (the
    warning: why the training rows' ranking cannot be trusted, or None), or None when this run
    wrote no label_issues.csv (regression; a run from before it existed). A file left by an
    earlier run in the same job dir is not this run's: metrics.json decides."""
    block = metrics.get("label_issues")
    path = storage.join(job_dir, block["file"]) if block else None
    if not block or not storage.exists(path):
        return None
    table = pd.read_csv(io.StringIO(storage.read_text(path)), keep_default_na=False)
    return {
        "rows": table.head(SHOWN).to_dict(orient="records"),
        "total": len(table),
        "columns": list(table.columns),
        "splits": block["splits"],
        "folds": block["folds"],
        "file": block["file"],
        "warning": block.get("warning"),
    }
