"""A run's log says what --encoder-layers kept, once (issue 64, low: a student's log never
said the flag took effect)."""

import logging

from trainer import config as config_lib
from trainer import task_registry
from trainer.modeling.encoders import depth
from trainer.training import jobdir, stages
from trainer.training.context import RunContext, Runtime


def test_the_description_names_the_layers_kept_of_how_many():
    assert depth.described(6, 3) == "3 of 6 layers kept (--encoder-layers 3: layers 0, 2, 5)"
    assert depth.described(2, 2) == "2 of 2 layers kept (--encoder-layers 2: layers 0, 1)"


def encoder_log(tiny_encoder_dir, tmp_path, *flags):
    """The lines the load_encoder stage logs for a run with `flags`."""
    import tensorflow as tf

    config = config_lib.build_config(
        ["--encoder", tiny_encoder_dir, "--job-dir", str(tmp_path), "--max-seq-length", "16", *flags], {}
    )
    ctx = RunContext(config, {}, jobdir.JobPaths.from_config(config), is_chief=True)
    ctx.task = task_registry.from_config(config)
    ctx.runtime = Runtime(None, None, tf.distribute.get_strategy(), "", None)
    lines = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())
    logger = logging.getLogger("trainer")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        stages.load_encoder(ctx)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    return lines


def test_the_encoder_stage_logs_the_layers_kept_once_and_only_with_the_flag(tiny_encoder_dir, tmp_path):
    kept = encoder_log(tiny_encoder_dir, tmp_path / "shallower", "--encoder-layers", "1")
    whole = encoder_log(tiny_encoder_dir, tmp_path / "whole")
    assert [line for line in kept if "layers kept" in line] == [
        "encoder: 1 of 2 layers kept (--encoder-layers 1: layers 0)"
    ]
    assert [line for line in whole if "layers kept" in line] == []
