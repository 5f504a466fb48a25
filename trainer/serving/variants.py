"""The precisions a model dir holds, and which one `--precision` loads.

The float32 SavedModel is the model dir itself (what Vertex serves from AIP_STORAGE_URI, what
any TensorFlow loads). Its lower-precision copies (faster or not on a given CPU: each one's check
records the speeds it measured) live beside it, inside the same dir, so they travel with the
model wherever the dir is copied or uploaded: MODEL_DIR/bfloat16/ (a SavedModel:
trainer.serving.quantize) and MODEL_DIR/int8/model.tflite (the classifier alone:
trainer.serving.tflite), each written only after it agrees with float32.
MODEL_DIR/precisions.json lists the copies and the figures of the check each one passed.
"""
import json
from typing import Optional

from trainer import hardware, storage, strict_json
from trainer.errors import UserError

MANIFEST = "precisions.json"
PRECISIONS = ("auto", "float32", "int8", "bfloat16")
# What this version writes, and the file that marks each copy complete.
VARIANTS = ("int8", "bfloat16")
MARKERS = {"bfloat16": "saved_model.pb", "int8": "model.tflite"}
# --precision's help in trainer.predict, trainer.serve and trainer.submit deploy (choose's rule).
AUTO_HELP = ("'auto' takes the int8 copy when the model dir holds one, else the bfloat16 copy "
             "where the CPU computes bfloat16 natively (AMX, AVX512_BF16) and the dir holds "
             "one, else float32.")
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
           why_not: Optional[str] = None) -> str:
    """The precision to load. `auto`: int8 where the dir holds it (the fastest copy on the CPU
    README's Benchmarks measured); else bfloat16 where the CPU computes it natively and the dir
    holds it; float32 otherwise (a GPU host asks for bfloat16 explicitly). An explicit
    precision the dir does not hold is an error naming the command that writes it, or
    (`why_not`, from precisions.json) why no such copy can be made."""
    if requested == "auto":
        if "int8" in held:
            return "int8"
        return "bfloat16" if native_bf16 and "bfloat16" in held else "float32"
    if requested not in PRECISIONS:
        raise UserError(f"--precision: choose one of {', '.join(PRECISIONS)}, got {requested!r}")
    if requested not in held:
        writes = (f"none can be made: {why_not}" if why_not else
                  f"python -m trainer.export_quantized --model-dir {model_dir} --precision {requested} writes it")
        raise UserError(f"--precision {requested}: {model_dir} holds no {requested} model (it holds "
                        f"{', '.join(held)}); {writes}")
    return requested


def resolve(model_dir: str, requested: str, cpuinfo_text: Optional[str] = None) -> tuple:
    """(precision, the dir holding it) for `--precision requested` on this host's CPU."""
    held = available(model_dir)
    native = requested == "auto" and hardware.cpu_has_native_bf16(
        hardware.read_cpuinfo() if cpuinfo_text is None else cpuinfo_text)
    why_not = read_manifest(model_dir).get(requested, {}).get("why") if requested not in held else None
    precision = choose(requested, held, native, model_dir, why_not)
    return precision, variant_dir(model_dir, precision)


def load(model_dir: str, precision: str):
    """The model of `precision` (resolved) as loaded: export.load_module's, or the int8 module
    that reads like it."""
    from trainer.serving import export, tflite

    if precision == "int8":
        return tflite.int8_module(export.load_module(model_dir), tflite.read(variant_dir(model_dir, "int8")))
    return export.load_module(variant_dir(model_dir, precision))
