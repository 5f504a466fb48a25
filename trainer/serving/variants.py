"""The precisions a model dir holds, and which one `--precision` loads.

The float32 SavedModel is the model dir itself (what Vertex serves from AIP_STORAGE_URI, what
any TensorFlow loads). A faster copy lives beside it, inside the same dir, so it travels with the
model wherever the dir is copied or uploaded: MODEL_DIR/bfloat16/ (trainer.serving.quantize
writes it only after it agrees with float32). MODEL_DIR/precisions.json lists the copies and
the figures of the check each one passed.
"""
import json
from typing import Optional

from trainer import hardware, storage
from trainer.errors import UserError

MANIFEST = "precisions.json"
PRECISIONS = ("auto", "float32", "int8", "bfloat16")
# What this version writes. int8 is a valid request (the flag's choices are fixed), but no int8
# model is written: TFLite's converter does not convert this encoder's graph (strided slices
# with new_axis need the Flex delegate, absent from the pip interpreter), and the int8
# conversions tried through ONNX Runtime fell short of the agreement check.
VARIANTS = ("bfloat16",)
SAVED_MODEL_PARTS = ("saved_model.pb", "fingerprint.pb", "variables", "assets")


def variant_dir(model_dir: str, precision: str) -> str:
    return model_dir if precision == "float32" else storage.join(model_dir, precision)


def float32_size(model_dir: str) -> int:
    """Bytes of the float32 SavedModel alone (not the copies inside its dir)."""
    return sum(storage.tree_size(storage.join(model_dir, name)) for name in SAVED_MODEL_PARTS)


def read_manifest(model_dir: str) -> dict:
    """{precision: its check's figures} of the copies beside the float32 model ({} for none)."""
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
    storage.write_text_atomic(storage.join(model_dir, MANIFEST), json.dumps(manifest, indent=2) + "\n")


def available(model_dir: str) -> tuple:
    """float32, then every copy the manifest lists whose SavedModel is there."""
    copies = [p for p in read_manifest(model_dir)
              if p in PRECISIONS and storage.exists(storage.join(variant_dir(model_dir, p), "saved_model.pb"))]
    return ("float32", *copies)


def choose(requested: str, held: tuple, native_bf16: bool, model_dir: str = "MODEL_DIR") -> str:
    """The precision to load. `auto`: bfloat16 where the CPU computes it natively (where it was
    measured faster, README's Benchmarks) and the dir holds it; float32 otherwise (a GPU host
    asks for bfloat16 explicitly). An explicit
    precision the dir does not hold is an error naming the command that writes it."""
    if requested == "auto":
        return "bfloat16" if native_bf16 and "bfloat16" in held else "float32"
    if requested not in PRECISIONS:
        raise UserError(f"--precision: choose one of {', '.join(PRECISIONS)}, got {requested!r}")
    if requested not in held:
        writes = (f"python -m trainer.export_quantized --model-dir {model_dir} writes it"
                  if requested in VARIANTS else f"this version writes no {requested} model")
        raise UserError(f"--precision {requested}: {model_dir} holds no {requested} model (it holds "
                        f"{', '.join(held)}); {writes}")
    return requested


def resolve(model_dir: str, requested: str, cpuinfo_text: Optional[str] = None) -> tuple:
    """(precision, its SavedModel dir) for `--precision requested` on this host's CPU."""
    held = available(model_dir)
    native = requested == "auto" and hardware.cpu_has_native_bf16(
        hardware.read_cpuinfo() if cpuinfo_text is None else cpuinfo_text)
    precision = choose(requested, held, native, model_dir)
    return precision, variant_dir(model_dir, precision)
