"""What the CPU can compute natively, from /proc/cpuinfo, and how many cores this process may
use: no TensorFlow needed.

Training (trainer.training.distribution) chooses its precision from it, prediction and serving
(trainer.serving.variants) which of a model dir's models to load, and the LiteRT and ONNX
Runtime models how many threads they compute on.
"""

import os

# Native bfloat16 instructions in /proc/cpuinfo "flags": what oneDNN uses for fast bf16 matmuls.
CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16")


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity: a container's or a taskset's share),
    else the machine's."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def read_cpuinfo(path: str = "/proc/cpuinfo") -> str:
    """The file's text; "" where there is none (macOS, Windows: no native-bf16 detection)."""
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def cpu_has_native_bf16(cpuinfo_text: str) -> bool:
    flags = set()
    for line in cpuinfo_text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            flags.update(value.lower().split())
    return any(flag in flags for flag in CPU_BF16_FLAGS)
