"""The zero-shot score: a kind whose model means something before it trains (Task.zero_shot: a
sentence encoder's vectors) has its validation figures measured with the weights it starts
from, metrics.json's `zero_shot`, the score fine-tuning must beat. Measured once, before the
first epoch, and kept in the job dir (zero_shot.json), so a resumed run reports the same."""

import json
import logging

from trainer import storage
from trainer.training.context import RunContext

log = logging.getLogger("trainer")

FILE = "zero_shot.json"


def measure(ctx: RunContext) -> None:
    if not ctx.task.zero_shot:
        return
    path = storage.join(ctx.paths.job_dir, FILE)
    if storage.exists(path):
        ctx.zero_shot = json.loads(storage.read_text(path))
        return
    if ctx.trainable.first_epoch > 0:  # a run from before the file was kept: not measurable now
        log.info("zero-shot score: not measured (the run resumed after training began without it)")
        return
    from trainer.training import fitting

    outputs, labels = fitting.predict_split(ctx, "validation")
    result = ctx.task.summarize(outputs, labels, ctx.datasets.labels.names)
    ctx.zero_shot = {"validation": result}
    log.info("zero-shot (before training): validation %s", ctx.task.describe(result))
    if ctx.is_chief:
        storage.write_text_atomic(path, json.dumps(ctx.zero_shot) + "\n")
