"""Where and how a run computes: device detection, strategy, precision, XLA and padding.

Three steps, in this order, at the very start of a run:

1. `detect_devices` looks at the host without initialising the TensorFlow runtime;
2. `plan_runtime` turns (flags, devices, TF_CONFIG) into a `RuntimePlan`: a pure function, so the
   whole selection matrix is unit-tested without accelerators, and every choice carries a
   human-readable reason that is logged and saved in metrics.json;
3. `create_strategy` builds the tf.distribute strategy before any other TensorFlow op
   (MultiWorkerMirroredStrategy fails with "Collective ops must be configured at program
   startup" otherwise, tensorflow/tensorflow#55178, #31154), then `apply_precision` sets the
   dtype policy.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping

from trainer import hardware, tpu
from trainer.config import RuntimeConfig
from trainer.errors import UserError
from trainer.vertex import environment as vertex


@dataclasses.dataclass(frozen=True)
class Devices:
    """What this host has, detected once."""

    platform: str  # "cpu" | "gpu" | "tpu"
    gpu_count: int = 0
    gpu_compute_capabilities: tuple = ()  # e.g. ((7, 0), (7, 0)); empty when unknown (ROCm)
    cpu_bf16: bool = False  # AVX512_BF16 or AMX_BF16 in /proc/cpuinfo flags
    tpu: str | None = None  # "local" on a TPU VM, else the TPU node's grpc:// address or name

    @property
    def remote_tpu(self) -> bool:
        """A TPU node reached over the network (pre-TPU-VM era): it reads only gs:// paths."""
        return self.tpu is not None and self.tpu != "local"


@dataclasses.dataclass(frozen=True)
class RuntimePlan:
    strategy: str  # "default" | "mirrored" | "multiworker" | "tpu"
    precision: str  # "float32" | "mixed_float16" | "mixed_bfloat16"  (Keras policy name)
    jit_compile: bool
    sequence_padding: str  # "bucket" | "fixed"
    static_shapes: bool  # full training batches, padded last evaluation batch (TPU input path)
    task_type: str
    task_index: int
    is_chief: bool
    reasons: tuple  # why each choice was made: logged and saved in metrics.json


# ---------------------------------------------------------------------------------------------
# Detection


def find_tpu(environ: Mapping[str, str], dev_dir: str = "/dev") -> str | None:
    """The TPUClusterResolver argument for an attached TPU, or None. Never touches the runtime.

    Signals, first match wins:
    - TPU chips exposed to this VM (a TPU VM, Vertex TPU jobs included; `tpu.tpu_chips_attached`).
      They are "local" even when TPU_NAME is also set, as people export TPU_NAME on TPU VMs for
      gcloud; resolving a TPU VM by name is what fails in tensorflow/tensorflow#53296.
    - TPU_NAME=local: the same, when the device files are hidden (some containers).
    - KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS (GKE) or TPU_NAME (a grpc:// address or node name): a
      remote TPU node, the variables TPUClusterResolver itself reads, in its order.
    The legacy AI Platform TPU_CONFIG variable is not read: Vertex runs TPUs as TPU VMs.
    Probing with TPUClusterResolver(tpu="local") instead would initialise the TPU system (and
    the TF runtime) and on a machine without a TPU fail slowly or crash.
    """
    if tpu.tpu_chips_attached(dev_dir):
        return "local"
    for name in ("KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS", "TPU_NAME"):
        value = environ.get(name, "").strip()
        if value:
            return value
    return None


def detect_devices(environ: Mapping[str, str], cpuinfo_text: str | None = None, *, dev_dir: str = "/dev") -> Devices:
    """Accelerators and CPU features, without initialising the TensorFlow runtime.

    Only physical-device queries are used: they leave the context uninitialised, so a
    MultiWorkerMirroredStrategy or logical CPU devices can still be configured afterwards.
    """
    import tensorflow as tf

    cpu_bf16 = hardware.cpu_has_native_bf16(hardware.read_cpuinfo() if cpuinfo_text is None else cpuinfo_text)
    tpu = find_tpu(environ, dev_dir)
    if tpu is None and tf.config.list_physical_devices("TPU"):
        tpu = "local"
    gpus = tf.config.list_physical_devices("GPU")
    capabilities = tuple(tf.config.experimental.get_device_details(gpu).get("compute_capability") for gpu in gpus)
    if None in capabilities:  # ROCm reports none
        capabilities = ()
    platform = "tpu" if tpu else ("gpu" if gpus else "cpu")
    return Devices(
        platform=platform, gpu_count=len(gpus), gpu_compute_capabilities=capabilities, cpu_bf16=cpu_bf16, tpu=tpu
    )


def computes_bf16(devices: Devices) -> bool:
    """Native bfloat16: a CPU with AVX512_BF16/AMX, a TPU, or GPUs of compute capability 8.0+
    (below that CUDA emulates it, slower than float32)."""
    gpus = devices.gpu_compute_capabilities
    return (
        devices.cpu_bf16
        or devices.platform == "tpu"
        or (devices.platform == "gpu" and bool(gpus) and min(gpus) >= (8, 0))
    )


# ---------------------------------------------------------------------------------------------
# Planning (pure)


def plan_runtime(
    runtime: RuntimeConfig, *, devices: Devices, cluster: dict | None, encoder_backend: str, freeze_encoder: bool
) -> RuntimePlan:
    """Strategy, precision, XLA, static shapes and padding from flags, devices and TF_CONFIG;
    raises UserError naming the flag when the combination cannot work."""
    reasons = []
    strategy = _choose_strategy(runtime.distribution, devices, cluster, reasons)
    # The device that computes: a TPU left unused by --distribution none/mirrored is not it.
    platform = devices.platform
    if platform == "tpu" and strategy != "tpu":
        platform = "gpu" if devices.gpu_count else "cpu"
    precision = _choose_precision(runtime.mixed_precision, platform, devices, encoder_backend, reasons)
    jit = _choose_jit(runtime.jit_compile, platform, encoder_backend, freeze_encoder, reasons)
    static = _choose_static_shapes(runtime.static_shapes, platform, reasons)
    padding = _choose_padding(runtime.sequence_padding, static, jit, reasons)
    if platform == "tpu" and runtime.steps_per_execution == 1:
        reasons.append(
            "--steps-per-execution 1: the TPU idles between steps while the host "
            "loops; a larger value (e.g. 32) usually pays on TPU"
        )
    task_type, task_index, is_chief = vertex.task_role(cluster)
    if strategy == "multiworker":
        writes = "writes the final artifacts" if is_chief else "writes to a temporary directory"
        reasons.append(
            f"role: {task_type} {task_index} of {vertex.cluster_size(cluster)} workers, "
            f"{'chief' if is_chief else 'not chief'}: {writes}"
        )
    return RuntimePlan(
        strategy=strategy,
        precision=precision,
        jit_compile=jit,
        sequence_padding=padding,
        static_shapes=static,
        task_type=task_type,
        task_index=task_index,
        is_chief=is_chief,
        reasons=tuple(reasons),
    )


def _choose_strategy(flag: str, devices: Devices, cluster: dict | None, reasons: list) -> str:
    tasks = vertex.cluster_size(cluster)
    extra_roles = sorted(set((cluster or {}).get("cluster", {})) & {"ps", "evaluator"})
    if extra_roles and flag in ("auto", "multiworker"):
        raise UserError(
            f"--distribution: TF_CONFIG has {'/'.join(extra_roles)} tasks (Vertex "
            "worker pools 2 and 3); this trainer runs data-parallel on the chief and "
            "worker pools only: remove the others"
        )
    if tasks > 1 and flag in ("none", "mirrored"):
        raise UserError(
            f"--distribution {flag}: TF_CONFIG names {tasks} tasks, so every machine "
            "would train its own copy of the model; use auto or multiworker"
        )
    if devices.tpu and tasks > 1 and flag in ("auto", "tpu"):
        raise UserError(
            f"--distribution {flag}: a TPU is attached and TF_CONFIG names {tasks} "
            "tasks; multi-host TPU training is not supported: run one replica"
        )
    if flag == "tpu" and not devices.tpu:
        raise UserError(
            "--distribution tpu: no TPU found (no /dev/accel*, /dev/vfio/<n>, "
            "TPU_NAME or KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS). If one is attached, set "
            "TPU_NAME=local on a TPU VM or TPU_NAME=grpc://HOST:8470 for a TPU node"
        )
    if flag == "multiworker" and tasks <= 1:
        raise UserError(
            "--distribution multiworker: needs TF_CONFIG (or Vertex CLUSTER_SPEC) "
            f"naming 2+ chief/worker tasks; it names {tasks}"
        )

    if flag == "auto":
        if devices.tpu:
            chosen, why = "tpu", f"a TPU is attached ({devices.tpu})"
        elif tasks > 1:
            chosen, why = "multiworker", f"TF_CONFIG names {tasks} tasks"
        elif devices.gpu_count >= 2:
            chosen, why = "mirrored", f"{devices.gpu_count} GPUs on this machine"
        else:
            chosen = "default"
            why = "one GPU" if devices.gpu_count else "no accelerator"
            why += ", one machine"
        reasons.append(f"strategy: {chosen} (--distribution auto: {why})")
        return chosen
    chosen = "default" if flag == "none" else flag
    reasons.append(f"strategy: {chosen} (--distribution {flag})")
    if devices.tpu and chosen != "tpu":
        reasons.append(f"a TPU is attached ({devices.tpu}) but unused: the model runs on the host")
    if chosen == "mirrored" and devices.gpu_count < 2:
        reasons.append(
            "mirrored with fewer than 2 GPUs: one replica per logical "
            f"{'GPU' if devices.gpu_count else 'CPU device (normally 1)'}; "
            "same results as default, with synchronisation overhead"
        )
    return chosen


def _choose_precision(flag: str, platform: str, devices: Devices, encoder_backend: str, reasons: list) -> str:
    hub = encoder_backend == "hub"
    capabilities = devices.gpu_compute_capabilities
    if flag == "off":
        reasons.append("precision: float32 (--mixed-precision off)")
        return "float32"
    if flag == "float16":
        if platform == "tpu":
            raise UserError("--mixed-precision float16: TPUs compute in bfloat16, not float16; use bfloat16 or auto")
        if platform == "cpu":
            raise UserError(
                "--mixed-precision float16: CPUs have no fast float16 path; use "
                "bfloat16 (fast on CPUs with AVX512_BF16/AMX) or off"
            )
        if not capabilities or min(capabilities) < (7, 0):
            reasons.append(
                "float16 on GPUs below compute capability 7.0 (or unknown) has no "
                "Tensor Cores: it may be no faster than float32"
            )
        reasons.append(
            "precision: mixed_float16 with dynamic loss scaling (--mixed-precision "
            "float16)" + _hub_rewrite_note(hub, "float16")
        )
        return "mixed_float16"
    if flag == "bfloat16":
        if hub and platform != "cpu":
            raise UserError(
                "--mixed-precision bfloat16: with --encoder-backend hub on "
                f"{platform.upper()} the SavedModel keeps the float32 dtypes it was "
                "exported with (tensorflow/hub#466) and no bfloat16 graph rewrite "
                "exists there; use --encoder-backend native" + (" or float16" if platform == "gpu" else "")
            )
        if platform == "cpu" and not devices.cpu_bf16:
            reasons.append(
                "bfloat16 on a CPU without AVX512_BF16/AMX is emulated (or, for the hub "
                "rewrite, skipped): expect no gain, likely a slowdown"
            )
        if platform == "gpu" and (not capabilities or min(capabilities) < (8, 0)):
            reasons.append(
                "bfloat16 on GPUs below compute capability 8.0 (or unknown) is "
                "emulated: expect it to be slower than float32"
            )
        reasons.append("precision: mixed_bfloat16 (--mixed-precision bfloat16)" + _hub_rewrite_note(hub, "bfloat16"))
        return "mixed_bfloat16"

    # auto
    if platform == "tpu":
        if hub:
            reasons.append(
                "precision: float32 (--mixed-precision auto: the hub SavedModel keeps "
                "its exported float32 dtypes, tensorflow/hub#466, and the grappler "
                "bfloat16 rewrite is CPU-only; --encoder-backend native computes in "
                "bfloat16)"
            )
            return "float32"
        reasons.append("precision: mixed_bfloat16 (--mixed-precision auto: TPU)")
        return "mixed_bfloat16"
    if platform == "gpu":
        if capabilities and min(capabilities) >= (7, 0):
            reasons.append(
                "precision: mixed_float16 with dynamic loss scaling (--mixed-precision "
                f"auto: GPU compute capability {_capability_text(capabilities)})" + _hub_rewrite_note(hub, "float16")
            )
            return "mixed_float16"
        reasons.append(
            "precision: float32 (--mixed-precision auto: GPU compute capability "
            f"{_capability_text(capabilities) or 'unknown'}, below 7.0 on some GPU: "
            "no Tensor Cores)"
        )
        return "float32"
    if devices.cpu_bf16:
        reasons.append(
            "precision: mixed_bfloat16 (--mixed-precision auto: CPU with native "
            "bfloat16: 1.27-1.41x the float32 training throughput in README's benchmark)"
            + _hub_rewrite_note(hub, "bfloat16")
        )
        return "mixed_bfloat16"
    reasons.append("precision: float32 (--mixed-precision auto: CPU without AVX512_BF16/AMX)")
    return "float32"


def _hub_rewrite_note(hub: bool, dtype: str) -> str:
    if not hub:
        return ""
    option = "auto_mixed_precision" if dtype == "float16" else "auto_mixed_precision_onednn_bfloat16"
    return (
        f"; hub encoder: Keras policy stays float32 and the grappler {option} pass rewrites "
        "the graph, as a hub.KerasLayer ignores the Keras policy (tensorflow/hub#466)"
    )


def _capability_text(capabilities: tuple) -> str:
    return ", ".join(sorted({f"{major}.{minor}" for major, minor in capabilities}))


def _choose_jit(flag: str, platform: str, encoder_backend: str, freeze_encoder: bool, reasons: list) -> bool:
    hub_trained = encoder_backend == "hub" and not freeze_encoder
    if flag == "on":
        if hub_trained:
            raise UserError(
                "--jit-compile on: cannot train a hub.KerasLayer encoder: XLA "
                "recompiles it every step (about 30x slower). Use --encoder-backend "
                "native or --freeze-encoder"
            )
        note = " (on CPU XLA compiles each bucket length, and ran slower than graph mode)" if platform == "cpu" else ""
        reasons.append(f"jit_compile: on (--jit-compile on){note}")
        return True
    if flag == "off":
        reasons.append(
            "jit_compile: off (--jit-compile off)"
            + ("; TPU steps are XLA-compiled regardless" if platform == "tpu" else "")
        )
        return False
    if platform == "cpu":
        why = "CPU, where XLA compiles each bucket length and ran slower than graph mode"
        on = False
    elif hub_trained:
        why = "a trained hub.KerasLayer recompiles every step under XLA"
        on = False
    elif encoder_backend == "hub":
        why = f"frozen hub encoder on {platform.upper()}: XLA is only known to pay for the native encoder"
        on = False
    else:
        why = f"native encoder on {platform.upper()}"
        on = True
    reasons.append(f"jit_compile: {'on' if on else 'off'} (--jit-compile auto: {why})")
    return on


def _choose_static_shapes(flag: str, platform: str, reasons: list) -> bool:
    if flag == "off" and platform == "tpu":
        raise UserError(
            "--static-shapes off: a TPU compiles one program per input shape and needs static shapes; use auto or on"
        )
    static = flag == "on" or (flag == "auto" and platform == "tpu")
    why = f"--static-shapes {flag}" + (f": {'a TPU needs them' if static else 'not a TPU'}" if flag == "auto" else "")
    effect = (
        "full training batches (drop_remainder), the last evaluation batch padded with weight-0 rows"
        if static
        else "partial batches as they come"
    )
    reasons.append(f"static_shapes: {'on' if static else 'off'} ({why}): {effect}")
    return static


def _choose_padding(flag: str, static: bool, jit: bool, reasons: list) -> str:
    if flag == "bucket" and static:
        raise UserError(
            "--sequence-padding bucket: static shapes (on TPU, or --static-shapes "
            "on) need one sequence length; use fixed or auto"
        )
    if flag == "auto":
        padding = "fixed" if static else "bucket"
        why = "static shapes" if static else "fewer padded positions"
        reasons.append(f"sequence_padding: {padding} (--sequence-padding auto: {why})")
    else:
        padding = flag
        reasons.append(f"sequence_padding: {padding} (--sequence-padding {flag})")
    if padding == "bucket" and jit:
        reasons.append("XLA compiles the step once per bucket length, not once overall")
    return padding


def check_tpu_paths(plan: RuntimePlan, devices: Devices, paths: Mapping[str, str | None]) -> None:
    """A remote TPU node reads and writes through its own host, which sees only gs://.

    `paths` maps a flag ("--job-dir") to its value; None is skipped and comma-separated lists
    are checked item by item. TPU VMs (devices.tpu == "local") read local paths fine.
    """
    if plan.strategy != "tpu" or not devices.remote_tpu:
        return
    for flag, value in paths.items():
        for path in (value or "").split(","):
            path = path.strip()
            if path and not path.startswith("gs://"):
                raise UserError(
                    f"{flag}: {path!r} is local, but the TPU node {devices.tpu} "
                    "reads and writes only Cloud Storage: use a gs:// path"
                )


# ---------------------------------------------------------------------------------------------
# Runtime (TensorFlow side effects)


def create_strategy(plan: RuntimePlan, devices: Devices, cluster: dict | None = None):
    """The tf.distribute.Strategy of `plan`. Call before any other TensorFlow op.

    `cluster` is the parsed TF_CONFIG (vertex.parse_cluster); by default read from os.environ.
    The multi-worker cluster is passed explicitly, so that a Vertex CLUSTER_SPEC without
    TF_CONFIG works too (MultiWorkerMirroredStrategy itself reads only TF_CONFIG).
    """
    import tensorflow as tf

    if plan.strategy == "default":
        return tf.distribute.get_strategy()
    if plan.strategy == "mirrored":
        if devices.gpu_count:
            return tf.distribute.MirroredStrategy()
        # With no GPU, MirroredStrategy() takes only /cpu:0; use every logical CPU device
        # (several only when configured, e.g. by tests).
        return tf.distribute.MirroredStrategy([d.name for d in tf.config.list_logical_devices("CPU")])
    if plan.strategy == "multiworker":
        cluster = cluster if cluster is not None else vertex.parse_cluster(os.environ)
        resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
            tf.train.ClusterSpec(cluster["cluster"]),
            task_type=plan.task_type,
            task_id=plan.task_index,
            rpc_layer=cluster.get("rpc_layer", "grpc"),
        )
        return tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
    # "tpu": connect and initialise the TPU system first, as TPUStrategy requires.
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=devices.tpu)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, RuntimeError, tf.errors.OpError) as error:
        raise UserError(
            f"--distribution {plan.strategy}: cannot connect to the TPU {devices.tpu!r}: {error}"
        ) from error
    return tf.distribute.TPUStrategy(resolver)


def apply_precision(plan: RuntimePlan, encoder_backend: str) -> str:
    """Set the dtype policy of `plan`; returns a one-line description for the log.

    A hub.KerasLayer runs the SavedModel's traced functions with the dtypes fixed at export,
    whatever the Keras policy says (tensorflow/hub#466, #790). For it, the Keras policy stays
    float32 and a grappler pass rewrites the float32 graph instead: on oneDNN CPUs this was
    measured as fast as the native bfloat16 encoder. The rewrite adds no loss scaling: with
    mixed_float16 the caller wraps the optimizer in a LossScaleOptimizer itself.
    """
    import tensorflow as tf
    import tf_keras

    hub = encoder_backend == "hub"
    rewrite = None
    if hub and plan.precision == "mixed_float16":
        rewrite = "auto_mixed_precision"
    elif hub and plan.precision == "mixed_bfloat16":
        rewrite = "auto_mixed_precision_onednn_bfloat16"
    # Set both options every time: a second run in the same process must not inherit the first's.
    tf.config.optimizer.set_experimental_options(
        {
            "auto_mixed_precision": rewrite == "auto_mixed_precision",
            "auto_mixed_precision_onednn_bfloat16": rewrite == "auto_mixed_precision_onednn_bfloat16",
        }
    )
    if rewrite:
        tf_keras.mixed_precision.set_global_policy("float32")
        compute = "float16" if plan.precision == "mixed_float16" else "bfloat16"
        return f"Keras policy float32; grappler {rewrite} rewrites the hub encoder's float32 graph to {compute} compute"
    tf_keras.mixed_precision.set_global_policy(plan.precision)
    if plan.precision == "float32":
        return "Keras policy float32: float32 compute and variables"
    compute = "float16" if plan.precision == "mixed_float16" else "bfloat16"
    scaling = ", dynamic loss scaling" if compute == "float16" else ""
    return (
        f"Keras policy {plan.precision}: {compute} compute, float32 variables{scaling}; "
        "the output layer must stay float32"
    )


def describe(plan: RuntimePlan, strategy) -> dict:
    """What the log and metrics.json record about the runtime: the plan, replicas and devices."""
    import tensorflow as tf

    if plan.strategy == "default":  # its extended.worker_devices raises RuntimeError
        logical = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
        devices = [logical[0].name]
    else:
        devices = list(strategy.extended.worker_devices)
    return {
        **dataclasses.asdict(plan),
        "reasons": list(plan.reasons),
        "replicas": strategy.num_replicas_in_sync,
        "devices": devices,
    }
