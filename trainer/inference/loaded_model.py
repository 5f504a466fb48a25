"""A loaded model's API: what every layer asks of an export (export.load_module's or export.load's,
its signature, an int8 LiteRT copy, or an ONNX copy read through serving/onnx/runtime.py, which
reads like an export): its task, its tokenizer, its padding ladder, and its outputs over many
texts in input order, batched by token count.

Its own module below serving/ and explaining/, which both use it (the server explains texts;
the exporter writes the explaining signature): neither imports the other's layer for it.
Without TensorFlow at import (numpy inside the functions), as the ONNX runtime needs.
"""

SIGNATURE = "serving_default"
TOKENIZE_ROWS = 1024


def signature(model):
    """The serving signature of a loaded export (export.load_module), an ONNX copy's
    (serving/onnx/runtime.py), or the signature itself."""
    if not hasattr(model, "signatures"):
        return getattr(model, "serving_signature", model)
    return model.signatures[SIGNATURE]


def tokenizes(model) -> bool:
    """Exports since token-sorted prediction save `tokenize` and `predict_tokens` besides the
    signature; older ones are run through the signature, batched by character count."""
    return hasattr(model, "tokenize") and hasattr(model, "predict_tokens")


def tokenize(model, texts, pairs=None) -> dict:
    """The export's own features of every text (numpy int32 [N, max_seq_length])."""
    import numpy as np

    parts = []
    for start in range(0, max(len(texts), 1), TOKENIZE_ROWS):
        args = [np.asarray(texts[start : start + TOKENIZE_ROWS], dtype=object)]
        if pairs is not None:
            args.append(np.asarray(pairs[start : start + TOKENIZE_ROWS], dtype=object))
        parts.append({k: np.asarray(v) for k, v in model.tokenize(*args).items()})
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def ladder_of(model):
    """A loaded export's padded lengths, or None for an export from before they were saved."""
    import numpy as np

    saved = getattr(model, "padded_lengths", None)
    return None if saved is None else np.asarray(saved).tolist()


def batch_ladder(model):
    """The lengths `_outputs` groups a model's rows by: its padding ladder (a TensorFlow model
    reuses a traced graph per length), or the coarser `run_lengths` of a model that cuts each run
    to its own longest row (an ONNX copy: serving/onnx/runtime.py), so that a server's batch of
    a few texts of many lengths is one run, not one per rung."""
    lengths = getattr(model, "run_lengths", None)
    return ladder_of(model) if lengths is None else lengths


def token_batches(features: dict, batch_size: int, ladder=None):
    """(row indices, features) batches of rows sorted by token count, each padded only to the
    ladder length of its longest row, and never mixing two ladder lengths. `ladder`: the
    export's padded lengths (saved since --long-texts windows, whose rows are whole windows);
    else the one ending at the features' width."""
    import numpy as np

    from trainer.data.padding import padded_lengths, padded_to

    lengths = features["input_mask"].sum(axis=1)
    ladder = padded_lengths(features["input_mask"].shape[1]) if ladder is None else ladder
    order = np.argsort(lengths, kind="stable")
    rung = padded_to(lengths[order], ladder)
    starts = np.flatnonzero(np.diff(rung, prepend=-1))
    for begin, end in zip(starts, [*starts[1:], len(order)]):
        for first in range(begin, end, batch_size):
            rows = order[first : min(first + batch_size, end)]
            width = int(rung[first])
            yield rows, {k: v[rows, :width] for k, v in features.items()}


def _char_batches(texts, batch_size: int, pairs=None):
    """(row indices, signature inputs) batches of similar character counts."""
    import numpy as np

    lengths = [len(t) for t in texts] if pairs is None else [len(a) + len(b) for a, b in zip(texts, pairs)]
    order = np.argsort(lengths, kind="stable")
    for start in range(0, len(texts), batch_size):
        rows = order[start : start + batch_size]
        inputs = {"text": np.asarray([texts[i] for i in rows], dtype=object)}
        if pairs is not None:
            inputs["text_pair"] = np.asarray([pairs[i] for i in rows], dtype=object)
        yield rows, inputs


def _outputs(model, texts, batch_size: int, pairs=None, features=None):
    """(row indices, model outputs) of every row once; `features`: tokenize()'s, if done.
    Outputs that are not finite stop it with one error (finite.finite_outputs)."""
    from trainer.inference.finite import finite_outputs

    if tokenizes(model):
        if features is None:
            features = tokenize(model, texts, pairs)
        for rows, batch in token_batches(features, batch_size, batch_ladder(model)):
            yield rows, finite_outputs(model.predict_tokens(batch))
        return
    serve = signature(model)
    for rows, inputs in _char_batches(texts, batch_size, pairs):
        yield rows, finite_outputs(serve(**inputs))


def predict_outputs(model, texts, batch_size: int, pairs=None, features=None, wanted=None) -> dict:
    """{output: numpy array of every row's, in input order} of the outputs `wanted` that the
    export returns (default: every one; strings as bytes), except `label_names`, which every
    row repeats: once. `model`: export.load_module's (fastest) or export.load's."""
    import numpy as np

    collected = {}
    for rows, out in _outputs(model, texts, batch_size, pairs, features):
        for name in [name for name in wanted or out if name in out]:
            value = np.asarray(out[name])
            if name == "label_names":
                collected[name] = value[0]
                continue
            collected[name] = _room_for(collected.get(name), value, len(texts))
            collected[name][(rows, *map(slice, value.shape[1:]))] = value
    return collected


def _room_for(collected, value, rows: int):
    """`collected` (None at first), an array of every row's outputs, wide enough for a batch's
    `value`: a tagger's outputs per word or entity are as wide as its batch's most, at least
    --max-seq-length (tasks/tagging/export.py), so a batch with a long text widens them (zeros
    after a row's last word, as its count says)."""
    import numpy as np

    shape = (rows, *value.shape[1:]) if collected is None else (rows, *np.maximum(collected.shape[1:], value.shape[1:]))
    if collected is not None and collected.shape == shape:
        return collected
    wider = np.zeros(shape, value.dtype)
    if collected is not None:
        wider[tuple(map(slice, collected.shape))] = collected
    return wider


def label_names_of(outputs: dict) -> list:
    """The label names of predict_outputs' outputs, decoded (as the task kinds read them)."""
    from trainer.inference import split_predictions

    return split_predictions.label_names_of(outputs)


def task_of(model):
    """The task object of a loaded export (export.load_module's or export.load's, its signature
    or an int8 copy), told by its signature's outputs: it decides what is answered."""
    from trainer import task_registry

    return task_registry.of_export(signature(model).structured_outputs)


def predict_each_text(model, texts, pairs, batch_size: int, wanted=None) -> dict:
    """predict_outputs' of a model of one text that compares two (Task.compares_pairs): each
    text of a row predicted alone, stacked [N, sides, ...] (two sides with `pairs`, else one)."""
    import numpy as np

    sides = [
        predict_outputs(model, side, batch_size, None, None, wanted) for side in (texts, pairs) if side is not None
    ]
    return {name: np.stack([side[name] for side in sides], axis=1) for name in sides[0]}


def task_outputs(model, task, texts, batch_size: int, pairs=None, features=None) -> dict:
    """predict_outputs' of the outputs `task`'s answers are made of (Task.answer_outputs)."""
    return predict_outputs(model, texts, batch_size, pairs, features, task.answer_outputs)


def predict_texts(model, texts, batch_size: int, pairs=None, features=None):
    """(probabilities [N, C], label names [C]) in input order; batches of similar length.
    `model`: export.load_module's (fastest) or export.load's."""
    return predict_classes(model, texts, batch_size, pairs, features)[:2]


def predict_classes(model, texts, batch_size: int, pairs=None, features=None):
    """predict_texts' (probabilities, label names), and the class index the model chose for
    each text [N]: its most probable class, or for a binary model exported with a threshold
    (--target-precision/--target-recall) its positive class at or above that threshold."""
    import numpy as np

    out = predict_outputs(model, texts, batch_size, pairs, features, ("probabilities", "label_index", "label_names"))
    return out["probabilities"], label_names_of(out), out["label_index"].astype(np.int64)


def is_pair_model(model) -> bool:
    """A sentence-pair export takes `text_pair` besides `text`."""
    return "text_pair" in signature(model).structured_input_signature[1]


def empty_rows(texts, pairs=None):
    """Rows whose text, or pair, is empty or blank: the rows training refuses
    (trainer.data.splits), whose labels would be confident and meaningless."""
    import numpy as np

    blank = [not text.strip() for text in texts]
    if pairs is not None:
        blank = [a or not b.strip() for a, b in zip(blank, pairs)]
    return np.asarray(blank, bool)


def warm_up(model) -> None:
    """Runs the model once on an empty text: the first call of each function optimizes its
    graph (seconds), a cost of loading rather than of the rows that follow."""
    list(_outputs(model, [""], 1, [""] if is_pair_model(model) else None))
