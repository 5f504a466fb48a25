"""Lower-precision copies of a trained model beside its float32 export, each kept only if it
agrees with it. Whether a copy is faster depends on the CPU: the check times it against float32
and the log says which was faster on the machine that wrote it.

bfloat16: the classifier built again under the mixed_bfloat16 policy and given the trained
weights: a tf-keras layer computes in bfloat16 from float32 variables only when it was built
under a mixed policy (its variables are then AutoCastVariables), so the policy of a model trained
in float32 cannot be switched after the fact. Its variables stay float32 (the copy is as large
as the float32 model); its matmuls and einsums run in bfloat16, natively on CPUs with
AVX512_BF16/AMX (oneDNN), TPUs and GPUs from compute capability 8.0. The head (pooling, logits,
a regression's destandardizing layer) keeps its explicit float32.

int8: the classifier built again in float32 and converted by trainer.serving.tflite.

The check (trainer.serving.agreement) runs both models on the same validation rows, tokenized
once, and times them: the copy is moved into place and listed in precisions.json only if it
passed; otherwise it is deleted and the reason returned for the one line the caller prints.
"""

import contextlib
import time
from collections.abc import Callable, Sequence

import tensorflow as tf
import tf_keras

from trainer import storage
from trainer.errors import UserError
from trainer.serving import agreement, export, variants

# Validation rows the check predicts twice (float32 and the copy): a fixed sample, seeded, so the
# check costs seconds at any data size; 2,000 rows put the agreement within about 0.2 points.
CHECK_ROWS = 2_000


@contextlib.contextmanager
def global_policy(name: str):
    previous = tf_keras.mixed_precision.global_policy()
    tf_keras.mixed_precision.set_global_policy(name)
    try:
        yield
    finally:
        tf_keras.mixed_precision.set_global_policy(previous)


def _weights(variables) -> list:
    """The float variables, in model order (a dropout generator's int64 state is not a weight)."""
    return [v for v in variables if tf.as_dtype(v.dtype).is_floating]


def classifier_with(build: Callable[[], tuple], variables, policy: str) -> tuple:
    """`build()`'s (preprocessor, classifier) under the dtype `policy`, the classifier holding
    the values of `variables` (the trained model's, or a loaded export's classifier_variables,
    in the same order)."""
    with global_policy(policy):
        preprocessor, model = build()
    targets, values = _weights(model.variables), _weights(variables)
    if [tuple(t.shape) for t in targets] != [tuple(v.shape) for v in values]:
        raise UserError(
            "the classifier built again does not match the trained one (another "
            "--encoder, --pooling or label set?); export the run again"
        )
    for target, value in zip(targets, values):
        target.assign(value)
    return preprocessor, model


def bfloat16_copy(
    build: Callable[[], tuple], variables, reference, task, label_names: Sequence[str], max_seq_length: int, pair: bool
) -> tuple:
    """(write(dir), load(dir)) of the bfloat16 SavedModel."""
    preprocessor, model = classifier_with(build, variables, "mixed_bfloat16")
    module = module_like(reference, preprocessor, model, task, label_names, max_seq_length, pair)
    return (lambda path: export.save(module, path)), export.load_module


def int8_copy(build: Callable[[], tuple], variables, reference, task) -> tuple:
    """(write(dir), load(dir)) of the int8 classifier (what `task`'s export serves of it),
    computed by LiteRT beside `reference`."""
    from trainer.serving import tflite

    flatbuffers = tflite.convert(task.unit.served(classifier_with(build, variables, "float32")[1]))

    def write(path: str) -> None:
        storage.makedirs(path)
        for name in tflite.FILES:  # model.tflite, which marks the copy complete, last
            storage.write_bytes_atomic(storage.join(path, name), flatbuffers[name])

    return write, lambda path: tflite.int8_module(reference, tflite.read(path))


def module_like(
    reference, preprocessor, model: tf_keras.Model, task, label_names: Sequence[str], max_seq_length: int, pair: bool
):
    """A serving module of `task` around `model` (export.serving_module) with the float32
    export's own temperature and decisions (Task.decisions_of_export: a binary model's
    threshold, multi-label's thresholds), and its --long-texts (an export from before it had
    one truncates)."""
    temperature = getattr(reference, "temperature", None)
    return task.unit.serving_module(
        task,
        preprocessor,
        model,
        label_names,
        max_seq_length,
        temperature=1.0 if temperature is None else float(temperature.numpy()),
        pair=pair,
        long_texts=export.saved_long_texts(reference),
        decisions=task.decisions_of_export(reference),
    )


def decided(task, module, texts, pairs, features, batch_size: int) -> tuple:
    """(what agreement.compare reads of `module`'s outputs for these rows: the task's
    agreement_values (the chosen class, the chosen labels, scores, or entities) in row order,
    rows per second)."""
    outputs, speed = _outputs(task, module, texts, pairs, features, batch_size)
    return task.agreement_values(outputs), speed


def check_features(reference, task, texts, pairs):
    """The float32 export's features of the check's rows, tokenized once for both models; None
    when it answers through its signature (a tagger's) or `task` compares two texts, each
    tokenized alone (_outputs)."""
    from trainer.inference import loaded_model

    if not loaded_model.tokenizes(reference) or task.compares_pairs:
        return None
    return loaded_model.tokenize(reference, texts, pairs)


def _outputs(task, module, texts, pairs, features, batch_size: int, every: bool = False) -> tuple:
    """(the outputs the check reads, or `every` one, rows per second); the first call of each
    function, which optimizes its graph, is made beforehand (loaded_model.warm_up) and not timed."""
    from trainer.inference import loaded_model

    loaded_model.warm_up(module)
    start = time.perf_counter()
    names = None if every else task.agreement_outputs()
    if task.compares_pairs and pairs is not None:  # a model of one text: each side alone, [N, 2, ...]
        outputs = loaded_model.predict_each_text(module, texts, pairs, batch_size, names)
    else:
        outputs = loaded_model.predict_outputs(module, texts, batch_size, pairs, features, names)
    return outputs, len(texts) / max(time.perf_counter() - start, 1e-9)


def export_checked(
    copy: tuple,
    reference,
    model_dir: str,
    precision: str,
    task,
    texts,
    pairs,
    labels,
    label_names: Sequence[str],
    batch_size: int,
    own_tokens: bool = False,
    max_difference: float | None = None,
) -> dict:
    """Writes `copy` (bfloat16_copy's, int8_copy's or an ONNX copy's) as MODEL_DIR/<precision>
    if it agrees with `reference`, MODEL_DIR's float32 model as loaded, on these rows; returns
    the check's figures (`passed`, `why`) with both speeds. `own_tokens`: the copy tokenizes
    by itself (an ONNX copy), so its features are compared with the float32 model's too, and
    every output (parity's figures), refused above `max_difference` when given; a copy
    answering through its signature (a tagger's) text by text (its unit's copy_parity)."""

    write, load = copy
    features = check_features(reference, task, texts, pairs)
    target = variants.variant_dir(model_dir, precision)
    tmp = storage.temporary_sibling(target)
    try:
        write(tmp)
        float32, float32_speed = _outputs(task, reference, texts, pairs, features, batch_size, own_tokens)
        loaded = load(tmp)
        candidate, speed = _outputs(task, loaded, texts, pairs, features, batch_size, own_tokens)
        figures = agreement.compare(
            task, task.agreement_values(float32), task.agreement_values(candidate), labels, label_names
        )
        if own_tokens:
            _refuse_unless(
                figures,
                task.unit.copy_parity(reference, loaded, float32, candidate, texts, pairs, features, max_difference),
            )
    except BaseException:
        if storage.exists(tmp):
            storage.remove(tmp)
        raise
    figures.update(
        precision=precision,
        rows_per_second=speed,
        float32_rows_per_second=float32_speed,
        speedup=speed / float32_speed,
        size_bytes=storage.tree_size(tmp),
        float32_size_bytes=variants.float32_size(model_dir),
    )
    if not figures["passed"]:
        storage.remove(tmp)
        return figures
    storage.replace_directory(tmp, target)
    variants.record(model_dir, precision, figures)
    return figures


def parity(
    float32: dict, candidate: dict, features: dict, own_features: dict, texts, max_difference: float | None = None
) -> dict:
    """A copy that tokenizes by itself against its float32 model: `token_rows_differing` (rows
    whose features differ) and `max_difference` (of any float output), with `why` when the
    features of a row differ or the difference passes `max_difference`."""
    import numpy as np

    differing = np.flatnonzero(
        np.any([np.any(features[name] != own_features[name], axis=1) for name in features], axis=0)
    )
    largest = max(
        (
            float(np.max(np.abs(candidate[name] - value), initial=0.0))
            for name, value in float32.items()
            if value.dtype.kind == "f"
        ),
        default=0.0,
    )
    return parity_figures(differing, largest, texts, max_difference)


def parity_figures(differing, largest: float, texts, max_difference: float | None) -> dict:
    """parity's figures and reasons, of the rows whose tokens differ and the largest difference."""
    why = []
    if len(differing):
        why.append(
            f"its tokenizer's ids differ from the float32 model's on {len(differing)} of "
            f"{len(texts)} validation rows (e.g. {str(texts[differing[0]])[:80]!r})"
        )
    if max_difference is not None and largest > max_difference:
        why.append(f"its outputs differ from float32's by up to {largest:.2g} (at most {max_difference:g} allowed)")
    return {"token_rows_differing": int(len(differing)), "max_difference": largest, "why": why}


def _refuse_unless(figures: dict, found: dict) -> None:
    """Adds `found`'s figures to the check's, and its reasons to refuse (parity's `why`)."""
    reasons = found.pop("why")
    figures.update(found)
    if reasons:
        figures["why"] = "; ".join(filter(None, [figures["why"], *reasons]))
        figures["passed"] = False


def describe(figures: dict) -> str:
    """One line for the log: what was checked, and written or refused."""
    agreed = (
        ""
        if figures["label_agreement"] is None
        else agreement.agreed(figures["label_agreement"], figures.get("label_agreement_of", "rows")) + " "
    )
    head = (
        f"{figures['precision']} model: {agreed}{figures['rows']} validation rows, "
        f"{figures['metric']} {figures['value']:.4f} vs {figures['float32_value']:.4f} "
        f"({figures['change_points']:+.2f} points), {figures['speedup']:.2f}x float32's speed here"
    )
    if not figures["passed"]:
        return f"{figures['precision']} model refused, not written: {figures['why']}"
    # Agreement decides whether a copy is written, not speed: a copy slower here may be faster
    # on the machine that serves it (bfloat16 needs AVX512_BF16/AMX), so it is kept, and called slower.
    slower = ", though slower than float32 on this machine" if figures["speedup"] < 1 else ""
    return f"{head}; written beside the float32 model{slower}"
