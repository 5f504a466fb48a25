"""report.html: one self-contained page (figures inline as data URIs, no scripts, no network),
so it opens anywhere, including from a gs:// download."""
import base64
from typing import Optional, Sequence

import jinja2

_TEMPLATES = jinja2.Environment(loader=jinja2.PackageLoader("trainer.reporting", "templates"),
                                autoescape=True, trim_blocks=True, lstrip_blocks=True,
                                undefined=jinja2.StrictUndefined)


def figure_entry(title: str, png: bytes, note: str = "") -> dict:
    return {"title": title, "note": note, "base64": base64.b64encode(png).decode("ascii")}


def render(job_dir: str, metrics: dict, metric: str, figures: Sequence[dict],
           calibration: Optional[dict], errors, errors_per_split: int) -> str:
    """`figures` from figure_entry(); `errors` is errors.csv's frame."""
    return _TEMPLATES.get_template("report.html.j2").render(
        title=f"{len(metrics['labels'])}-class classifier: {metrics['hyperparameters']['encoder']}",
        job_dir=job_dir, encoder=metrics["hyperparameters"]["encoder"], labels=metrics["labels"],
        best_epoch=metrics.get("best_epoch"), epochs_completed=metrics.get("epochs_completed"),
        metric=metric, summary=[(name, metrics[name]) for name in ("train", "validation", "test")
                                if name in metrics],
        figures=figures, calibration=calibration, errors=errors.to_dict(orient="records"),
        errors_per_split=errors_per_split)
