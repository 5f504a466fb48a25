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
from typing import Optional

from trainer import hardware, storage, strict_json
from trainer.errors import UserError

log = logging.getLogger("trainer")

MANIFEST = "precisions.json"
PRECISIONS = ("auto", "float32", "int8", "bfloat16")
# What this version writes, and the file that marks each copy complete.
VARIANTS = ("int8", "bfloat16")
MARKERS = {"bfloat16": "saved_model.pb", "int8": "model.tflite"}
# `--precision auto` loads a copy only when its check timed it at least this much faster than
# float32 (trainer.serving.quantize). The check times its rows once, on the machine that wrote
# the copy: a few percent either way is noise there (issue #64: an int8 copy timed at 0.99x was
# loaded). And a copy agrees with float32 on 99% of rows, not all of them: one no faster is
# not worth its differences.
AUTO_MIN_SPEEDUP = 1.1
# --precision's help in trainer.predict, trainer.serve and trainer.submit deploy (auto's rule).
AUTO_HELP = (f"'auto' takes the copy in the model dir its check timed fastest, if at "
             f"{AUTO_MIN_SPEEDUP:g}x float32's speed or more (the bfloat16 copy only where the CPU "
             f"computes bfloat16 natively: AMX, AVX512_BF16); else float32.")
SAVED_MODEL_PARTS = ("saved_model.pb", "fingerprint.pb", "variables", "assets")


def unsupported(precision: str, encoder_backend: str, long_texts_mode: str) -> Optional[str]:
    """Why no `precision` copy of such a model can be made (None: it can): the run records it
    in precisions.json, so that --precision and trainer.export_quantized say it rather than
    suggest a command that cannot succeed."""
    if precision == "bfloat16" and encoder_backend == "hub":
        return ("--encoder-backend hub: a hub.KerasLayer keeps its exported dtypes "
                "(tensorflow/hub#466), so no copy computes in bfloat16")
    if precision == "int8" and long_texts_mode == "windows":
        return ("--long-texts windows: the int8 model (trainer.serving.tflite) takes one window "
                "per row; the float32 and bfloat16 models serve texts of any length")
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
        raise UserError(f"{path}: not valid JSON ({e}); delete it, or rewrite it with "
                        f"python -m trainer.export_quantized --model-dir {model_dir}") from None


def record(model_dir: str, precision: str, figures: Optional[dict]) -> None:
    """Adds (or, with None, removes) one precision's entry in the manifest, atomically."""
    manifest = read_manifest(model_dir)
    if figures is None:
        manifest.pop(precision, None)
    else:
        manifest[precision] = figures
    storage.write_text_atomic(storage.join(model_dir, MANIFEST),
                              strict_json.dumps(manifest, indent=2) + "\n")


def available(model_dir: str) -> tuple:
    """float32, then every copy the manifest lists whose SavedModel is there."""
    copies = [p for p in read_manifest(model_dir)
              if p in MARKERS and storage.exists(storage.join(variant_dir(model_dir, p), MARKERS[p]))]
    return ("float32", *copies)


def choose(requested: str, held: tuple, native_bf16: bool, model_dir: str = "MODEL_DIR",
           checks: Optional[dict] = None) -> tuple:
    """(the precision to load, why: for `auto`, else None). `checks`: precisions.json's entries.
    An explicit precision the dir does not hold is an error saying why: its check refused it,
    no such copy can be made, or else the command that writes it."""
    checks = checks or {}
    if requested == "auto":
        return _auto(held, native_bf16, checks)
    if requested not in PRECISIONS:
        raise UserError(f"--precision: choose one of {', '.join(PRECISIONS)}, got {requested!r}")
    if requested not in held:
        raise UserError(f"--precision {requested}: {model_dir} holds no {requested} model (it holds "
                        f"{', '.join(held)}); {_absent(requested, checks.get(requested, {}), model_dir)}")
    return requested, None


def _absent(precision: str, check: dict, model_dir: str) -> str:
    """Why a dir holds no `precision` copy, from its precisions.json entry `check`: the command
    that writes one only where it can help (never tried: a run from before the copies, or one
    with the copy turned off)."""
    if check.get("passed") is False:
        return f"its check refused it, not written: {check['why']}"
    if check.get("why"):
        return f"none can be made: {check['why']}"
    return (f"python -m trainer.export_quantized --model-dir {model_dir} --precision {precision} "
            f"writes it")


def _auto(held: tuple, native_bf16: bool, checks: dict) -> tuple:
    """(precision, why) for `--precision auto`: of the copies held, the one its check timed
    fastest against float32 if at least AUTO_MIN_SPEEDUP, bfloat16 only where this CPU computes
    it natively (emulated, it is slower than float32); else float32, and why not each copy."""
    fast = {p: checks[p]["speedup"] for p in held
            if p != "float32" and checks.get(p, {}).get("speedup", 0) >= AUTO_MIN_SPEEDUP
            and (p != "bfloat16" or native_bf16)}
    if fast:
        best = max(fast, key=fast.get)
        return best, f"the {best} copy measured {fast[best]:.2f}x float32's speed at export"
    why = [_passed_over(p, held, native_bf16, checks.get(p, {})) for p in VARIANTS]
    return "float32", "; ".join(w for w in why if w) or "the model dir holds no int8 or bfloat16 copy"


def _passed_over(precision: str, held: tuple, native_bf16: bool, check: dict) -> str:
    """Why `auto` does not take the `precision` copy ("" where there was never one to take)."""
    if check.get("passed") is False:
        return f"the {precision} copy was refused by its check: {check['why']}"
    if precision not in held:
        return ""
    if precision == "bfloat16" and not native_bf16:
        return "the bfloat16 copy is slower than float32 on a CPU without native bfloat16 (AMX, AVX512_BF16)"
    if "speedup" not in check:
        return f"the {precision} copy's check timed no speed"
    return (f"the {precision} copy measured {check['speedup']:.2f}x float32's speed at export "
            f"(auto needs {AUTO_MIN_SPEEDUP:.2f}x)")


def resolve(model_dir: str, requested: str, cpuinfo_text: Optional[str] = None) -> tuple:
    """(precision, the dir holding it) for `--precision requested` on this host's CPU; `auto`
    logs its choice and why."""
    held = available(model_dir)
    native = requested == "auto" and hardware.cpu_has_native_bf16(
        hardware.read_cpuinfo() if cpuinfo_text is None else cpuinfo_text)
    precision, why = choose(requested, held, native, model_dir, read_manifest(model_dir))
    if why:
        log.info("--precision auto: %s: %s", precision, why)
    return precision, variant_dir(model_dir, precision)


def load(model_dir: str, precision: str):
    """The model of `precision` (resolved) as loaded: export.load_module's, or the int8 module
    that reads like it."""
    from trainer.serving import export, tflite

    if precision == "int8":
        return tflite.int8_module(export.load_module(model_dir), tflite.read(variant_dir(model_dir, "int8")))
    return export.load_module(variant_dir(model_dir, precision))
