"""The last stages of a run: evaluate the best weights, calibrate and export them, report,
and write metrics.json last."""

import dataclasses
import logging
import platform
import time

import numpy as np

from trainer import storage, strict_json
from trainer.inference import finite
from trainer.serving import export as export_lib
from trainer.training import jobdir
from trainer.training.context import RunContext
from trainer.training.fitting import predict_split

log = logging.getLogger("trainer")

# The final train-split metrics read at most this many training rows: a fixed sample, seeded
# with --seed, so that they cost seconds at any data size (the whole split took minutes at
# 60k rows, hours at 10M) and two runs with one seed score the same rows. They show how far
# training fits its data next to validation; 2,000 rows put an accuracy within about 2 points.
TRAIN_EVALUATION_ROWS = 2_000
# The float32 ONNX copy's outputs may differ from the SavedModel's by at most this much
# (issue 66's bar; the design study measured 2e-6 on 4,000 SST-2 texts).
ONNX_MAX_DIFFERENCE = 1e-4


def sample_rows(total: int, size: int, seed: int) -> np.ndarray:
    """Sorted indices of `min(size, total)` distinct rows of `total`, the same for one seed."""
    if total <= size:
        return np.arange(total, dtype=np.int64)
    chosen = np.random.default_rng(seed).choice(total, size=size, replace=False)
    return np.sort(chosen).astype(np.int64)


def train_sample(total: int, seed: int) -> dict:
    """metrics.json's description of the rows the "train" metrics were computed on."""
    rows = min(total, TRAIN_EVALUATION_ROWS)
    return {
        "rows": rows,
        "of": total,
        "seed": seed,
        "note": (
            "every training row"
            if rows == total
            else f"a fixed random sample of the training rows (at most "
            f"{TRAIN_EVALUATION_ROWS}, drawn with the run's --seed)"
        ),
    }


def evaluate(ctx: RunContext) -> None:
    """Validation and test with the best epoch's weights, and a temperature fitted on
    validation. Each split is predicted once: its outputs are kept in ctx.outputs for the
    operating point, the metrics (`summarize`) and the report."""
    from trainer.reporting import calibration

    # Before the best weights are restored: their checkpoint holds the optimizer's step then.
    ctx.train_steps = int(ctx.trainable.model.optimizer.iterations.numpy())
    best_is_current = restore_best_weights(ctx)
    # Validation and test logits also fit and score the calibration, and make the report.
    logits = ctx.outputs
    if best_is_current:
        logits["validation"] = ctx.fit.evaluation.last_outputs
    for name in ctx.inputs.eval_sets:
        if name in ("validation", "test") and name not in logits:
            logits[name] = predict_split(ctx, name)
    finite.check_finite_outputs(logits["validation"][0], "validation rows")
    ctx.task.fit_on_validation(*logits["validation"])  # multi-label thresholds
    if ctx.task.calibration is not None:  # a temperature rescales class probabilities only
        ctx.calibration = calibration.calibration_block(logits, applied=ctx.config.output.calibrate == "on")
        _log_calibration(ctx.calibration)


def summarize(ctx: RunContext) -> None:
    """Every split's final metrics, logged as metrics.json records them: at the decisions the
    export makes, so after the operating point (trainer.training.operating_point) when there is
    one. The tuning service hears the final value."""
    caveat = ctx.task.validation_caveat(has_test="test" in ctx.outputs)
    for name in ctx.inputs.eval_sets:
        ctx.results[name] = _summary(ctx, *ctx.outputs[name]) if name in ctx.outputs else _evaluate_train_sample(ctx)
        result = ctx.results[name]
        total = len(ctx.inputs.tokenized[name])
        log.info(
            "%-10s %s  (%d examples%s)",
            name,
            ctx.task.describe(result),
            result["examples"],
            f" of {total}: a sample seeded with --seed" if result["examples"] < total else "",
        )
        if name == "validation" and caveat:
            result["caveat"] = caveat
            log.info("%-10s %s", "", caveat)
    if ctx.fit.hypertune:
        metric = ctx.config.train.selection_metric.removeprefix("val_")
        ctx.fit.hypertune.report_final(ctx.results["validation"][metric], step=len(ctx.fit.history.rows))


def restore_best_weights(ctx: RunContext) -> bool:
    """The best epoch's weights into the model (the run's, or a cross-fitting fold's:
    trainer.training.cross_fit). Returns True when the last epoch trained here was the best:
    the model held its weights already and its validation outputs are known, one pass over the
    validation data fewer."""
    import tensorflow as tf

    fit = ctx.fit
    best_is_current = fit.best.best_epoch is not None and fit.best.best_epoch == fit.evaluation.last_epoch
    if fit.best.weights_prefix and not best_is_current:
        tf.train.Checkpoint(model=ctx.trainable.model).read(fit.best.weights_prefix).expect_partial()
        log.info(
            "restored the best weights: %s %d, %s %.4f",
            fit.best.unit,
            fit.best.best_epoch,
            ctx.config.train.selection_metric,
            fit.best.best,
        )
    return best_is_current


def _evaluate_train_sample(ctx: RunContext) -> dict:
    """Train-split metrics on `sample_rows` of the training set (all of a small one)."""
    from trainer.data import input_pipeline

    train = ctx.inputs.tokenized["train"]
    rows = sample_rows(len(train), TRAIN_EVALUATION_ROWS, ctx.config.train.seed)
    if len(rows) == len(train):
        return _summary(ctx, *predict_split(ctx, "train"))
    batching = dataclasses.replace(
        ctx.inputs.train_batching, drop_remainder=False, batch_size=ctx.config.train.eval_batch_size
    )
    dataset = input_pipeline.evaluation_dataset(
        train.take(rows), batching, pad_to_full_batches=ctx.runtime.plan.static_shapes
    )
    return _summary(ctx, *predict_split(ctx, "train", dataset, len(rows)))


def _summary(ctx: RunContext, outputs, labels) -> dict:
    """The task's metrics of a split's outputs and labels (predict_split's)."""
    return ctx.task.summarize(outputs, labels, ctx.datasets.labels.names)


def _log_calibration(block: dict) -> None:
    validation = block["validation"]
    log.info(
        "calibration: temperature %.3f %s: %s (validation ECE %.4f -> %.4f, log loss %.4f -> %.4f)",
        block["temperature"],
        "applied to the export" if block["applied"] else "not applied, the export keeps T = 1",
        block["why"],
        validation["ece_before"],
        validation["ece_after"],
        validation["nll_before"],
        validation["nll_after"],
    )


def export(ctx: RunContext) -> None:
    """The SavedModel that takes raw strings, computing in float32 unless --export-precision
    training; only the chief's copy lands in model/."""
    preprocessor, model = ctx.encoder.preprocessor, ctx.trainable.model
    target = ctx.runtime.write_path(ctx.paths.model_dir)
    with export_lib.computing_in_float32(model, ctx.config.runtime.export_precision == "float32"):
        export_lib.export(
            _serving_module(ctx, preprocessor, model), ctx.paths.model_dir, write_dir=target, job_dir=ctx.paths.job_dir
        )
    log.info("exported the model (raw strings in, %s out) to %s", ctx.task.exported_outputs, target)


def export_bfloat16(ctx: RunContext) -> None:
    """MODEL_DIR/bfloat16 beside the float32 export (chief only), written only if it agrees
    with float32 on validation (trainer.serving.quantize); the figures go to metrics.json."""
    _export_copy(ctx, "bfloat16", *_bfloat16_wanted(ctx))


def export_int8(ctx: RunContext) -> None:
    """MODEL_DIR/int8 beside the float32 export (chief only), on the same terms as bfloat16."""
    _export_copy(ctx, "int8", *_int8_wanted(ctx))


def export_onnx(ctx: RunContext) -> None:
    """MODEL_DIR/onnx, the float32 ONNX copy (trainer.serving.onnx), written only if every
    output is within ONNX_MAX_DIFFERENCE of the float32 export's on validation and its
    tokenizer gives the export's ids."""
    _export_copy(ctx, "onnx", *_onnx_wanted(ctx, "onnx"))


def export_onnx_int8(ctx: RunContext) -> None:
    """MODEL_DIR/onnx-int8, quantized from MODEL_DIR/onnx, checked as the int8 copy is."""
    _export_copy(ctx, "onnx-int8", *_onnx_wanted(ctx, "onnx-int8"))


def _export_copy(ctx: RunContext, precision: str, wanted: bool, why_not) -> None:
    """Writes the copy when wanted; else says why not in the log and metrics.json, and, when no
    such copy can be made of this model, in precisions.json (variants.unsupported)."""
    from trainer.serving import variants

    if wanted:
        try:
            figures = write_copy(ctx, ctx.paths.model_dir, ctx.trainable.model.variables, precision)
            ctx.precisions[precision] = {"written": figures["passed"], **figures}
            return
        except Exception as error:  # noqa: BLE001  an optional copy never fails a trained run
            why = f"building or checking it failed: {(str(error).strip().splitlines() or [''])[0]}"
            log.warning(
                "%s model not written: %s (python -m trainer.export_quantized "
                "--model-dir %s --precision %s retries it)",
                precision,
                why,
                ctx.paths.model_dir,
                precision,
            )
            ctx.precisions[precision] = {"written": False, "why": why}
    elif why_not:
        ctx.precisions[precision] = {"written": False, "why": why_not}
        log.info("%s model not written: %s", precision, why_not)
        if why_not == unsupported(ctx, precision):
            variants.record(ctx.paths.model_dir, precision, ctx.precisions[precision])


def unsupported(ctx: RunContext, precision: str):
    """Why a run's model can have no `precision` copy (its encoder backend or long-texts
    mode; for the ONNX copies, its --preprocessor too), or None."""
    from trainer.serving import variants

    why = variants.unsupported(precision, ctx.config.model.encoder_backend, ctx.long_texts.mode)
    if why or precision not in variants.ONNX_VARIANTS:
        return why
    if ctx.config.model.preprocessor:
        return (
            "--preprocessor: a TF-Hub preprocessor tokenizes in its own graph, which the ONNX "
            "copies' tokenizer.json cannot carry"
        )
    return None


def write_copy(ctx: RunContext, model_dir: str, variables, precision: str) -> dict:
    """The checked `precision` copy of the classifier holding `variables` (the trained model's,
    or a finished run's export's: trainer.export_quantized); logs and returns the check's
    figures. A refusal is recorded in precisions.json (unless an earlier copy is there), so that
    --precision says the check refused the copy rather than suggest writing it again."""
    from trainer.serving import quantize, variants

    config, datasets = ctx.config, ctx.datasets
    rows = sample_rows(len(datasets.validation), quantize.CHECK_ROWS, config.train.seed)
    texts, pairs = datasets.read_texts("validation")["validation"]
    reference = export_lib.load_module(model_dir)
    checked = {
        "texts": texts[rows],
        "pairs": None if pairs is None else pairs[rows],
        "labels": ctx.task.agreement_labels(datasets.validation)[rows],
        "label_names": datasets.labels.names,
    }
    copy, checks = _copy(ctx, model_dir, variables, precision, reference, checked)
    figures = quantize.export_checked(
        copy,
        reference,
        model_dir,
        precision,
        ctx.task,
        checked["texts"],
        checked["pairs"],
        checked["labels"],
        checked["label_names"],
        config.train.eval_batch_size,
        **checks,
    )
    (log.info if figures["passed"] else log.warning)(quantize.describe(figures))
    if not figures["passed"] and precision not in variants.available(model_dir):
        variants.record(model_dir, precision, {"written": False, **figures})
    return figures


def _copy(ctx: RunContext, model_dir: str, variables, precision: str, reference, checked: dict) -> tuple:
    """((write, load) of the `precision` copy, export_checked's checks beyond agreement)."""
    from trainer.serving import quantize

    build = lambda: _classifier(ctx)  # noqa: E731
    pair = checked["pairs"] is not None and not ctx.task.compares_pairs  # whether the export takes pairs
    if precision == "int8":
        return quantize.int8_copy(build, variables, reference, ctx.task), {}
    if precision == "bfloat16":
        return quantize.bfloat16_copy(
            build, variables, reference, ctx.task, checked["label_names"], ctx.config.data.max_seq_length, pair
        ), {}
    from trainer.serving.onnx import copies

    if precision == "onnx":
        copy, fused = copies.float32_copy(
            build, variables, reference, ctx.task, checked["label_names"], ctx.config.data.max_seq_length, pair
        )
        log.info("onnx model: %s", copies.fusion_words(fused))
        return copy, {"own_tokens": True, "max_difference": ONNX_MAX_DIFFERENCE}
    copy, _, searched = copies.int8_copy(
        model_dir, reference, ctx.task, checked, lambda: _ranking_texts(ctx), ctx.config.train.eval_batch_size
    )
    if searched:
        log.info(searched)
    return copy, {"own_tokens": True}


def _ranking_texts(ctx: RunContext) -> tuple:
    """(texts, pairs) of the training rows the int8 ONNX copy ranks its nodes on: a sample
    seeded with --seed, apart from the validation rows it is checked on; only those rows'
    texts are kept as the training file is read."""
    from trainer.serving.onnx import copies

    train = ctx.datasets.train
    sample = train.subset(sample_rows(len(train), copies.RANKING_ROWS, ctx.config.train.seed))
    return dataclasses.replace(ctx.datasets, train=sample).read_texts("train")["train"]


def _bfloat16_wanted(ctx: RunContext) -> tuple:
    """(write the copy?, why not, for metrics.json, when the user may wonder)."""
    from trainer.training import distribution

    flag = ctx.config.runtime.export_bfloat16
    if flag == "off" or not ctx.is_chief:
        return False, None
    if unsupported(ctx, "bfloat16"):
        return False, unsupported(ctx, "bfloat16")
    if flag == "auto" and not distribution.computes_bf16(ctx.runtime.devices):
        return False, (
            "--export-bfloat16 auto: this machine has no native bfloat16 "
            "(AVX512_BF16/AMX CPU, TPU or GPU 8.0+); --export-bfloat16 on writes it anyway"
        )
    return True, None


def _int8_wanted(ctx: RunContext) -> tuple:
    flag = ctx.config.runtime.export_int8
    if flag == "off" or not ctx.is_chief:
        return False, None
    if flag == "auto" and ctx.hub_encoder:
        return False, (
            "--export-int8 auto: a hub.KerasLayer encoder's graph is its publisher's, "
            "not converted to TensorFlow Lite; --export-int8 on tries it"
        )
    if unsupported(ctx, "int8"):
        return False, unsupported(ctx, "int8")
    return True, None


def _onnx_wanted(ctx: RunContext, precision: str) -> tuple:
    """(write the ONNX copy `precision`?, why not); the int8 one is quantized from the float32
    one, so it needs that one written."""
    if ctx.config.runtime.export_onnx == "off" or not ctx.is_chief:
        return False, None
    if unsupported(ctx, precision):
        return False, unsupported(ctx, precision)
    float32 = ctx.precisions.get("onnx", {})
    if precision == "onnx-int8" and not float32.get("written"):
        return False, f"it is quantized from the onnx model, not written: {float32.get('why')}"
    return True, None


def _window_flags(ctx: RunContext) -> dict:
    """metrics.json's window flags, with --long-texts windows only."""
    if not ctx.windows:
        return {}
    flags = ctx.long_texts
    return {
        "window_overlap": flags.window_overlap,
        "max_windows": flags.max_windows,
        "window_pooling": ctx.config.model.window_pooling,
    }


def _classifier(ctx: RunContext) -> tuple:
    """(preprocessor, the run's classifier) built afresh, encoder included, under the current
    dtype policy."""
    from trainer.training.stages import encoder_of, model_of

    encoder = encoder_of(ctx.config, ctx.environ)
    return encoder.preprocessor, model_of(ctx, encoder.network)


def _serving_module(ctx: RunContext, preprocessor, model):
    """The export of the run's task, with its decisions (a reached --target-precision/
    --target-recall's threshold, multi-label's thresholds: Task.export_decisions)."""
    return ctx.task.unit.serving_module(
        ctx.task,
        preprocessor,
        model,
        ctx.datasets.labels.names,
        ctx.config.data.max_seq_length,
        temperature=export_temperature(ctx),
        pair=ctx.datasets.text_pair_column is not None,
        long_texts=ctx.long_texts,
    )


def export_temperature(ctx: RunContext) -> float:
    """The temperature the export divides logits by: the fitted one when the calibration block
    applies it (calibration.decide), else 1."""
    applied = ctx.calibration is not None and ctx.calibration["applied"]
    return ctx.calibration["temperature"] if applied else 1.0


def report(ctx: RunContext) -> None:
    """report.html, report/*.png, errors.csv and MODEL_CARD.md (chief only), before metrics.json:
    a run killed in between is resumed, and reported, rather than finished without its report."""
    from trainer.reporting.build import build_report

    ctx.metrics = _metrics(ctx)
    if ctx.is_chief and ctx.config.output.report == "on":
        build_report(ctx.paths.job_dir, metrics=ctx.metrics, predictions=_report_predictions(ctx))


def _report_predictions(ctx: RunContext) -> dict:
    """The outputs `evaluate` predicted, as the export returns them: the report predicts nothing."""
    texts = ctx.datasets.read_texts(*ctx.outputs)
    return {
        name: ctx.task.split_predictions(outputs, labels, *texts[name], export_temperature(ctx))
        for name, (outputs, labels) in ctx.outputs.items()
    }


def write_artifacts(ctx: RunContext) -> None:
    """metrics.json, written last: its presence marks the run finished."""
    ctx.metrics["durations"].update(_durations(ctx))
    if ctx.is_chief:
        storage.write_text_atomic(ctx.paths.metrics, strict_json.dumps(ctx.metrics, indent=2) + "\n")
        if ctx.fit.experiment:
            ctx.fit.experiment.finish(ctx.metrics)
        keep = ctx.config.output.keep_checkpoints
        removed = jobdir.drop_checkpoints(ctx.paths, keep)
        if removed:
            log.info(
                "removed %s (--keep-checkpoints %s: the model/ export holds the best weights)", ", ".join(removed), keep
            )
    written = "artifacts in" if ctx.is_chief else "the chief writes the artifacts to"
    log.info("done in %.0fs; %s %s", ctx.metrics["durations"]["total"], written, ctx.paths.job_dir)


def _metrics(ctx: RunContext) -> dict:
    from trainer.training import distribution, teacher

    config, datasets, fit, runtime = ctx.config, ctx.datasets, ctx.fit, ctx.runtime
    return {
        **ctx.results,
        **_by_length(ctx),
        "train_sample": train_sample(len(ctx.inputs.tokenized["train"]), config.train.seed),
        "task": ctx.task.name,
        # A --dry-run's numbers say nothing: marked at the top, where a reader looks first.
        "dry_run": config.train.dry_run,
        "calibration": ctx.calibration,
        "precisions": ctx.precisions,
        "operating_point": ctx.operating_point,
        **({"zero_shot": ctx.zero_shot} if ctx.zero_shot is not None else {}),
        "label_issues": ctx.label_issues,
        "distillation": teacher.metrics_block(ctx),
        "labels": datasets.labels.names,
        "label_kind": datasets.labels.kind,
        "text_column": datasets.text_column,
        "text_pair_column": datasets.text_pair_column,
        "label_column": datasets.label_column,
        "dataset_sizes": datasets.sizes(),
        "data_hash": data_hash(datasets),
        "class_counts": datasets.class_counts(ctx.task),
        "rows_skipped": datasets.rows_skipped(),
        "contained_texts": ctx.contained,
        "truncated_texts": ctx.inputs.truncated,
        "hyperparameters": {
            **dataclasses.asdict(config.train),
            "epochs": ctx.inputs.epochs,
            "learning_rate": ctx.learning_rate,
            "layer_decay": ctx.layer_decay,
            "dropout": config.model.dropout,
            "max_seq_length": config.data.max_seq_length,
            "long_texts": config.data.long_texts,
            "pooling": ctx.pooling,
            **_window_flags(ctx),
            "encoder": config.model.encoder,
            "encoder_layers": config.model.encoder_layers,
        },
        "best_epoch": fit.best.best_epoch,
        "train_steps": ctx.train_steps,
        "epochs_completed": len(fit.history.rows),
        "stopped_early": fit.best.stopped_early or fit.stopped_before,
        "device": {
            **distribution.describe(runtime.plan, runtime.strategy),
            "platform": runtime.devices.platform,
            "precision_note": runtime.precision_note,
            "encoder_backend": ctx.encoder.backend,
            "encoder_source": ctx.encoder.source,
            "encoder_architecture": ctx.encoder.architecture,
        },
        "evaluated_with": evaluated_with(runtime.plan.precision, config.runtime.export_precision),
        "versions": library_versions(),
        "durations": _durations(ctx),
        **_throughput(ctx),
    }


def evaluated_with(policy: str, export_precision: str) -> dict:
    """metrics.json's word on which model its scores come from: the trained model, in its
    training compute dtype (evaluating the float32 export again would cost another pass over
    every split), next to the export's."""
    compute = {"mixed_bfloat16": "bfloat16", "mixed_float16": "float16"}.get(policy, "float32")
    exported = compute if export_precision == "training" else "float32"
    note = (
        "the exported model computes alike"
        if compute == exported
        else f"the exported model computes in {exported}, so its label may differ from these on a row now and then"
    )
    return {
        "model": "the trained model, with its best epoch's weights",
        "compute_dtype": compute,
        "export_compute_dtype": exported,
        "note": note,
    }


def _by_length(ctx: RunContext) -> dict:
    """The validation and test blocks with their `by_length` breakdown (long_texts.by_length)."""
    from trainer.data import long_texts

    limit, names = ctx.config.data.max_seq_length, ctx.datasets.labels.names
    return {
        name: {
            **ctx.results[name],
            "by_length": long_texts.by_length(
                ctx.inputs.tokenized[name].full_lengths, limit, *ctx.outputs[name], ctx.task, names
            ),
        }
        for name in ("validation", "test")
        if name in ctx.outputs and name in ctx.results
    }


def data_hash(datasets) -> str:
    """A hash of the texts and labels of every split the run used (rows in order): the model
    registry's label for it (trainer.deploy), equal for runs on the same data however its files
    were named or copied."""
    import hashlib

    digest = hashlib.sha256()
    for name, split in datasets.splits().items():
        digest.update(name.encode())
        digest.update(np.ascontiguousarray(split.hashes).tobytes())
        digest.update(np.ascontiguousarray(split.labels).tobytes())
    return digest.hexdigest()[:16]


def _durations(ctx: RunContext) -> dict:
    stages = ctx.durations
    return {
        "total": time.perf_counter() - ctx.started,
        "train": ctx.fit.clock.seconds,
        "first_step": ctx.fit.clock.first_step_seconds,
        "evaluate": (
            stages.get("evaluate", 0.0) + stages.get("summarize", 0.0) + ctx.fit.evaluation.seconds_evaluating
        ),
        "export": stages.get("export", 0.0),
        "export_bfloat16": stages.get("export_bfloat16", 0.0),
        "export_int8": stages.get("export_int8", 0.0),
        "export_onnx": stages.get("export_onnx", 0.0),
        "export_onnx_int8": stages.get("export_onnx_int8", 0.0),
        "report": stages.get("report", 0.0),
        "label_issues": stages.get("find_label_issues", 0.0),
        # the teacher stage: running a --teacher model (its file reused: reading it)
        "teacher": stages.get("teach", 0.0),
    }


def _throughput(ctx: RunContext) -> dict:
    """Steady state: after the first step, which traces the graph (durations.first_step)."""
    clock, train = ctx.fit.clock, ctx.inputs.training
    if clock.steady_seconds <= 0:
        return {"train_examples_per_second": None, "train_tokens_per_second": None}
    examples = (
        clock.steady_steps
        * ctx.config.train.batch_size
        * ctx.config.train.gradient_accumulation_steps
        / clock.steady_seconds
    )
    return {"train_examples_per_second": examples, "train_tokens_per_second": examples * train.real_tokens / len(train)}


def library_versions() -> dict:
    import numpy as np
    import pandas
    import sklearn
    import tensorflow as tf
    import tensorflow_hub
    import tensorflow_text
    import tf_keras

    import trainer

    return {
        "trainer": trainer.__version__,
        "python": platform.python_version(),
        "tensorflow": tf.__version__,
        "tf_keras": tf_keras.__version__,
        "tensorflow_text": tensorflow_text.__version__,
        "tensorflow_hub": tensorflow_hub.__version__,
        "numpy": np.__version__,
        "pandas": pandas.__version__,
        "scikit_learn": sklearn.__version__,
    }
