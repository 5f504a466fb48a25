"""The precisions a model dir holds, and which one `--precision` loads.

The float32 SavedModel is the model dir itself (what Vertex serves from AIP_STORAGE_URI, what
any TensorFlow loads). Its lower-precision copies (faster or not on a given CPU: each one's check
records the speeds it measured) live beside it, inside the same dir, so they travel with the
model wherever the dir is copied or uploaded: MODEL_DIR/bfloat16/ (a SavedModel:
trainer.serving.quantize) and MODEL_DIR/int8/model.tflite (the classifier alone:
trainer.serving.tflite), each written only after it agrees with float32.
MODEL_DIR/precisions.json lists the copies and the figures of the check each one passed, and
of each check that refused its copy (so that --precision says so rather than suggest writing it).
"""

import json
import logging

from trainer import hardware, installed, storage, strict_json
from trainer.errors import UserError
from trainer.serving import signature

log = logging.getLogger("trainer")

MANIFEST = "precisions.json"
PRECISIONS = ("auto", "float32", "int8", "bfloat16")
# What this version writes, and the file that marks each copy complete.
VARIANTS = ("int8", "bfloat16", "onnx", "onnx-int8")
MARKERS = {"bfloat16": "saved_model.pb", "int8": "model.tflite", "onnx": "onnx.json", "onnx-int8": "onnx.json"}
ONNX_VARIANTS = ("onnx", "onnx-int8")  # trainer/serving/onnx: the copies without TensorFlow
# `--precision auto` loads a copy only when its check timed it at least this much faster than
# float32 (trainer.serving.quantize). The check times its rows once, on the machine that wrote
# the copy: a few percent either way is noise there (issue #64: an int8 copy timed at 0.99x was
# loaded). And a copy agrees with float32 on 99% of rows, not all of them: one no faster is
# not worth its differences.
AUTO_MIN_SPEEDUP = 1.1
# --precision's help in trainer.predict, trainer.serve and trainer.submit deploy (auto's rule).
AUTO_HELP = (
    f"'auto' takes the copy in the model dir its check timed fastest, if at "
    f"{AUTO_MIN_SPEEDUP:g}x float32's speed or more (the bfloat16 copy only where the CPU "
    f"computes bfloat16 natively: AMX, AVX512_BF16); else float32. An ONNX copy within "
    f"{AUTO_MIN_SPEEDUP:g}x of the fastest is taken before it: it starts without TensorFlow."
)
SAVED_MODEL_PARTS = ("saved_model.pb", "fingerprint.pb", "variables", "assets")
RUNTIMES = ("auto", "tensorflow", "onnx")
# The copy each --runtime and --precision name: its precisions.json key and its folder in the
# model dir (TensorFlow's float32 model is the model dir itself). The ONNX copies run without
# TensorFlow (trainer/serving/onnx/runtime.py); the others need it (the int8 one tokenizes in it).
COPIES = {
    ("tensorflow", "float32"): "float32",
    ("tensorflow", "int8"): "int8",
    ("tensorflow", "bfloat16"): "bfloat16",
    ("onnx", "float32"): "onnx",
    ("onnx", "int8"): "onnx-int8",
}
RUNTIME_HELP = (
    "What runs the model: TensorFlow (the SavedModel and its int8 and bfloat16 copies) "
    "or ONNX Runtime (the ONNX copies, MODEL_DIR/onnx and onnx-int8, which need no "
    "TensorFlow). 'auto' takes the fastest of --precision's copies this Python can "
    "run, by the speeds their checks measured, as --precision auto chooses."
)


def unsupported(precision: str, encoder_backend: str, long_texts_mode: str) -> str | None:
    """Why no `precision` copy of such a model can be made (None: it can): the run records it
    in precisions.json, so that --precision and trainer.export_quantized say it rather than
    suggest a command that cannot succeed."""
    if precision == "bfloat16" and encoder_backend == "hub":
        return (
            "--encoder-backend hub: a hub.KerasLayer keeps its exported dtypes "
            "(tensorflow/hub#466), so no copy computes in bfloat16"
        )
    if precision == "int8" and long_texts_mode == "windows":
        return (
            "--long-texts windows: the int8 model (trainer.serving.tflite) takes one window "
            "per row; the float32 and bfloat16 models serve texts of any length"
        )
    if precision in ONNX_VARIANTS and encoder_backend == "hub":
        return "--encoder-backend hub: a hub.KerasLayer's graph is its publisher's, not converted to ONNX"
    return None


def variant_dir(model_dir: str, precision: str) -> str:
    return model_dir if precision == "float32" else storage.join(model_dir, precision)


def float32_size(model_dir: str) -> int:
    """Bytes of the float32 SavedModel alone (not the copies inside its dir)."""
    return sum(storage.tree_size(storage.join(model_dir, name)) for name in SAVED_MODEL_PARTS)


def read_manifest(model_dir: str) -> dict:
    """{precision: its check's figures} of the copies beside the float32 model ({} for none);
    a copy its check refused: {"written": false, "passed": false, "why": ..., figures};
    a copy that cannot be made for this model: {"written": false, "why": ...}."""
    path = storage.join(model_dir, MANIFEST)
    if not storage.exists(path):
        return {}
    try:
        return json.loads(storage.read_text(path))
    except json.JSONDecodeError as e:
        raise UserError(
            f"{path}: not valid JSON ({e}); delete it, or rewrite it with "
            f"python -m trainer.export_quantized --model-dir {model_dir}"
        ) from None


def record(model_dir: str, precision: str, figures: dict | None) -> None:
    """Adds (or, with None, removes) one precision's entry in the manifest, atomically."""
    manifest = read_manifest(model_dir)
    if figures is None:
        manifest.pop(precision, None)
    else:
        manifest[precision] = figures
    storage.write_text_atomic(storage.join(model_dir, MANIFEST), strict_json.dumps(manifest, indent=2) + "\n")


def available(model_dir: str) -> tuple:
    """float32, then every copy the manifest lists whose SavedModel is there."""
    copies = [
        p
        for p in read_manifest(model_dir)
        if p in MARKERS and storage.exists(storage.join(variant_dir(model_dir, p), MARKERS[p]))
    ]
    return ("float32", *copies)


def runtime_of(copy: str) -> str:
    return next(runtime for (runtime, _), name in COPIES.items() if name == copy)


def choose(
    requested: str,
    held: tuple,
    native_bf16: bool,
    model_dir: str = "MODEL_DIR",
    checks: dict | None = None,
    runtime: str = "tensorflow",
    tensorflow: bool = True,
) -> tuple:
    """(the copy to load: a precisions.json key, float32 for the SavedModel; why: when --runtime
    or --precision was `auto`, else None). `checks`: precisions.json's entries; `tensorflow`:
    whether this Python can run TensorFlow's copies. A copy the dir does not hold is an error
    saying why: its check refused it, no such copy can be made, or else the command that
    writes it."""
    checks = checks or {}
    if requested not in PRECISIONS:
        raise UserError(f"--precision: choose one of {', '.join(PRECISIONS)}, got {requested!r}")
    candidates = _candidates(requested, runtime, tensorflow)
    present = [copy for copy in candidates if copy in held]
    if not present:
        raise _not_held(requested, runtime, tensorflow, candidates, held, model_dir, checks)
    if len(candidates) == 1:
        return present[0], None
    return _auto(present, candidates, held, native_bf16 or requested != "auto", checks, tensorflow or runtime != "auto")


def _candidates(requested: str, runtime: str, tensorflow: bool) -> list:
    """The copies --runtime and --precision allow here, the runtime's default first."""
    if runtime not in RUNTIMES:
        raise UserError(f"--runtime: choose one of {', '.join(RUNTIMES)}, got {runtime!r}")
    if runtime == "tensorflow" and not tensorflow:
        raise installed.without("--runtime tensorflow")
    if runtime == "onnx" and requested == "bfloat16":
        raise UserError(
            "--precision bfloat16: the ONNX copies compute in float32 or int8; a bfloat16 "
            "copy runs with --runtime tensorflow"
        )
    runtimes = [runtime] if runtime != "auto" else ["tensorflow", "onnx"] if tensorflow else ["onnx"]
    precisions = PRECISIONS[1:] if requested == "auto" else (requested,)
    candidates = [COPIES[r, p] for r in runtimes for p in precisions if (r, p) in COPIES]
    if not candidates:  # bfloat16, where TensorFlow is not installed
        raise installed.without(f"--precision {requested}")
    return candidates


def _not_held(
    requested: str, runtime: str, tensorflow: bool, candidates: list, held: tuple, model_dir: str, checks: dict
) -> UserError:
    """The error for a model dir holding none of the `candidates` copies."""
    copy = candidates[0] if requested != "auto" else COPIES["onnx", "float32"]
    absent = _absent(copy, checks.get(copy, {}), model_dir)
    if requested != "auto":
        flags = f"--runtime onnx --precision {requested}" if runtime == "onnx" else f"--precision {requested}"
        return UserError(f"{flags}: {model_dir} holds no {copy} model (it holds {', '.join(held)}); {absent}")
    if runtime == "onnx":
        return UserError(f"--runtime onnx: {model_dir} holds no ONNX copy (it holds {', '.join(held)}); {absent}")
    if runtime == "tensorflow":
        return UserError(
            f"--runtime tensorflow: {model_dir} holds no TensorFlow model (it holds "
            f"{', '.join(held)}: an ONNX copy on its own); run it with --runtime onnx"
        )
    return UserError(
        f"--runtime auto: this Python has no TensorFlow to run {model_dir}'s "
        f"{', '.join(held)} model, and the dir holds no ONNX copy; {absent}, or install "
        f"the TensorFlow stack with `{installed.INSTALL_TENSORFLOW}`"
    )


def _absent(precision: str, check: dict, model_dir: str) -> str:
    """Why a dir holds no `precision` copy, from its precisions.json entry `check`: the command
    that writes one only where it can help (never tried: a run from before the copies, or one
    with the copy turned off)."""
    if check.get("passed") is False:
        return f"its check refused it, not written: {check['why']}"
    if check.get("why"):
        return f"none can be made: {check['why']}"
    return f"python -m trainer.export_quantized --model-dir {model_dir} --precision {precision} writes it"


def _auto(present: list, candidates: list, held: tuple, native_bf16: bool, checks: dict, tensorflow: bool) -> tuple:
    """(copy, why) for an `auto`: of the copies `present`, the one its check timed fastest if
    at least AUTO_MIN_SPEEDUP times the first one's speed (float32's, or the ONNX float32
    copy's where TensorFlow is not installed; every check times its copy against the float32
    SavedModel), bfloat16 only where this CPU computes it natively (emulated, it is slower
    than float32); else the first one, and why not each other copy."""
    first = present[0]
    needed = AUTO_MIN_SPEEDUP * _speedup(first, checks)
    fast = {
        copy: _speedup(copy, checks)
        for copy in present[1:]
        if _speedup(copy, checks) >= needed and (copy != "bfloat16" or native_bf16)
    }
    if fast:
        best = max(fast, key=fast.get)
        sooner = _starting_sooner(best, fast)
        if sooner != best:
            return sooner, (
                f"the {sooner} copy measured {_speed(sooner, first, checks)}, within "
                f"{AUTO_MIN_SPEEDUP:g}x of the {best} copy's, and answers without "
                f"importing TensorFlow"
            )
        return best, f"the {best} copy measured {_speed(best, first, checks)}"
    why = [_passed_over(copy, first, held, native_bf16, checks) for copy in candidates if copy != first]
    needing = [copy for copy in held if runtime_of(copy) == "tensorflow"]
    if not tensorflow and needing:
        why.append(
            f"the {', '.join(needing)} {'model needs' if len(needing) == 1 else 'models need'} "
            f"TensorFlow, which this Python does not have"
        )
    others = [copy for copy in candidates if copy != first]
    return first, "; ".join(w for w in why if w) or f"the model dir holds no {', '.join(others)} copy"


def _starting_sooner(best: str, fast: dict) -> str:
    """The fastest ONNX copy of `fast` ({copy: speedup}) when its speed is within
    AUTO_MIN_SPEEDUP of the `best` TensorFlow one's, else `best`: a check's single timing does
    not rank copies that close (on a Xeon with AMX, an export's check timed the int8 ONNX copy
    at 0.82x the LiteRT one's speed, where trainer.predict measured it at 1.03x to 1.13x), while
    the ONNX one answers a command without importing TensorFlow: 0.56 s to a first prediction
    against 5.34 s (docs/benchmarks.md, the ONNX copies)."""
    onnx = {copy: speedup for copy, speedup in fast.items() if runtime_of(copy) == "onnx"}
    if runtime_of(best) == "onnx" or not onnx:
        return best
    sooner = max(onnx, key=onnx.get)
    return sooner if onnx[sooner] * AUTO_MIN_SPEEDUP >= fast[best] else best


def _speedup(copy: str, checks: dict) -> float:
    """A copy's speed at export against the float32 SavedModel's (1 for that one; 0 for a copy
    whose check timed none, so auto never prefers it)."""
    return 1.0 if copy == "float32" else checks.get(copy, {}).get("speedup", 0)


def _speed(copy: str, first: str, checks: dict) -> str:
    """`copy`'s speed at export in words: against float32's, and the first copy's if not that."""
    said = f"{_speedup(copy, checks):.2f}x float32's speed at export"
    if first == "float32" or not _speedup(first, checks):
        return said
    return f"{said}, {_speedup(copy, checks) / _speedup(first, checks):.2f}x the {first} copy's"


def _passed_over(copy: str, first: str, held: tuple, native_bf16: bool, checks: dict) -> str:
    """Why `auto` does not take the `copy` ("" where there was never one to take)."""
    check = checks.get(copy, {})
    if check.get("passed") is False:
        return f"the {copy} copy was refused by its check: {check['why']}"
    if copy not in held:
        return ""
    if copy == "bfloat16" and not native_bf16:
        return "the bfloat16 copy is slower than float32 on a CPU without native bfloat16 (AMX, AVX512_BF16)"
    if "speedup" not in check:
        return f"the {copy} copy's check timed no speed"
    needs = f"{AUTO_MIN_SPEEDUP:.2f}x" if first == "float32" else f"{AUTO_MIN_SPEEDUP:.2f}x the {first} copy's"
    return f"the {copy} copy measured {_speed(copy, first, checks)} (auto needs {needs})"


def onnx_copy_alone(model_dir: str) -> str | None:
    """The copy `model_dir` is when it is an ONNX copy on its own (MODEL_DIR/onnx or onnx-int8,
    copied or served without the rest), else None."""
    from trainer.serving.onnx import runtime

    if not storage.exists(storage.join(model_dir, runtime.GRAPH_FACTS)):
        return None
    return COPIES["onnx", runtime.read_facts(model_dir)["precision"]]


def require_model(model_dir: str) -> None:
    """Refuses a --model-dir holding neither an export nor an ONNX copy on its own, in one line."""
    if onnx_copy_alone(model_dir) is None:
        signature.require_export(model_dir)


def signature_of(model_dir: str, copy_dir: str | None = None):
    """The serving signature (serving/signature.py) of the model dir's export, read without
    loading it; with `copy_dir`, of that ONNX copy, from its onnx.json."""
    if copy_dir is None:
        return signature.read(model_dir)
    from trainer.serving.onnx import runtime

    return runtime.signature_of(runtime.read_facts(copy_dir))


def resolve(model_dir: str, requested: str, cpuinfo_text: str | None = None, runtime: str = "auto") -> tuple:
    """(the copy of `--runtime runtime --precision requested` on this host, the dir holding it);
    an `auto` logs its choice and why."""
    alone = onnx_copy_alone(model_dir)
    held, checks = ((alone,), {}) if alone else (available(model_dir), read_manifest(model_dir))
    native = requested == "auto" and hardware.cpu_has_native_bf16(
        hardware.read_cpuinfo() if cpuinfo_text is None else cpuinfo_text
    )
    copy, why = choose(requested, held, native, model_dir, checks, runtime, installed.tensorflow())
    if why:
        flags = " ".join(
            f"--{flag} auto" for flag, value in (("runtime", runtime), ("precision", requested)) if value == "auto"
        )
        log.info("%s: %s: %s", flags, copy, why)
    return copy, model_dir if alone else variant_dir(model_dir, copy)


def load(model_dir: str, precision: str):
    """The copy `precision` (resolved: a precisions.json key) as loaded: export.load_module's,
    or a module that reads like it (the int8 one, an ONNX copy's, which its task's unit loads)."""
    if runtime_of(precision) == "onnx":
        from trainer import task_registry

        path = model_dir if onnx_copy_alone(model_dir) else variant_dir(model_dir, precision)
        return task_registry.of_onnx_copy(path).unit.onnx_module(path)
    import trainer
    from trainer.serving import export, tflite

    trainer.import_tensorflow()
    if precision == "int8":
        return tflite.int8_module(export.load_module(model_dir), tflite.read(variant_dir(model_dir, "int8")))
    return export.load_module(variant_dir(model_dir, precision))
