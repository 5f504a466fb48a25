"""Flags whose sense depends on the data's task or on where the run computes, checked as soon
as both are known (after load_data and resolve_runtime), before any encoder is loaded or model
trained: --target-precision/--target-recall and --find-label-issues (its task, its runtime, and
folds large enough to learn from)."""

from trainer.errors import UserError
from trainer.tasks import parts
from trainer.training import cross_fit, operating_point
from trainer.training.context import RunContext


def check_task_flags(ctx: RunContext) -> None:
    operating_point.check_task(ctx.task, ctx.datasets.labels.names, ctx.config.output)
    if not ctx.config.train.find_label_issues:
        return
    parts.require(ctx.task, "label_issues", "--find-label-issues")
    if ctx.runtime.plan.strategy == "multiworker":
        # The folds train on row subsets of the token cache, which a worker cannot shard by
        # blocks (trainer.training.fitting._training_data).
        raise UserError(
            "--find-label-issues: runs on one machine (any number of its GPUs or a "
            "TPU), not across several workers; drop the flag or the extra workers"
        )
    # A dry run keeps a batch of rows: its folds are small by design, and it checks the plumbing.
    if not ctx.config.train.dry_run:
        cross_fit.check_fold_sizes(
            ctx.task, ctx.datasets.train.labels, cross_fit.folds_of(ctx), ctx.datasets.labels.names
        )
