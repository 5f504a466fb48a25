"""Runtime selection: strategy, precision, XLA and padding as pure functions, plus real runs on CPU.

The matrix tests need no TensorFlow. The last tests create real strategies: the default one in
this process, MirroredStrategy over 2 logical CPUs and MultiWorkerMirroredStrategy over two
local processes in subprocesses (both must be configured before the TF runtime initialises);
then short CLI runs (slow tier) take the TPU input path (--static-shapes on) and
--steps-per-execution on CPU.
"""

import itertools
import json
import os
import socket
import subprocess
import sys
import textwrap

import pytest
from conftest import ROOT as REPO

from trainer.config import RuntimeConfig
from trainer.errors import UserError
from trainer.hardware import cpu_has_native_bf16
from trainer.training.distribution import (
    Devices,
    apply_precision,
    check_tpu_paths,
    create_strategy,
    describe,
    detect_devices,
    find_tpu,
    plan_runtime,
)
from trainer.vertex import environment as vertex

CPU = Devices("cpu")
CPU_BF16 = Devices("cpu", cpu_bf16=True)
GPU_V100 = Devices("gpu", gpu_count=1, gpu_compute_capabilities=((7, 0),))
GPU_2xV100 = Devices("gpu", gpu_count=2, gpu_compute_capabilities=((7, 0), (7, 0)))
GPU_2xK80 = Devices("gpu", gpu_count=2, gpu_compute_capabilities=((3, 7), (3, 7)))
GPU_MIXED = Devices("gpu", gpu_count=2, gpu_compute_capabilities=((6, 1), (7, 5)))
GPU_A100 = Devices("gpu", gpu_count=1, gpu_compute_capabilities=((8, 0),))
TPU_VM = Devices("tpu", cpu_bf16=False, tpu="local")
TPU_NODE = Devices("tpu", tpu="grpc://10.0.0.2:8470")

SINGLE = {"cluster": {"chief": ["m0:2222"]}, "task": {"type": "chief", "index": 0}}


def multi(task_type="chief", index=0):
    return {"cluster": {"chief": ["m0:2222"], "worker": ["m1:2222"]}, "task": {"type": task_type, "index": index}}


def plan(devices=CPU, cluster=None, backend="native", freeze=False, **flags):
    return plan_runtime(
        RuntimeConfig(**flags), devices=devices, cluster=cluster, encoder_backend=backend, freeze_encoder=freeze
    )


def assert_user_error(flag, **kwargs):
    with pytest.raises(UserError) as error:
        plan(**kwargs)
    assert flag in str(error.value)
    return str(error.value)


# --- strategy: every --distribution x devices x TF_CONFIG --------------------------------------

ERROR = "error"
DEVICE_KINDS = {"cpu": CPU, "1gpu": GPU_V100, "2gpu": GPU_2xV100, "tpu": TPU_VM}
CLUSTERS = {"no TF_CONFIG": None, "1-task TF_CONFIG": SINGLE, "2-task TF_CONFIG": multi()}
# For each flag and device kind: the strategy with no TF_CONFIG, a 1-task one, a 2-task one.
EXPECTED_STRATEGY = {
    "auto": {
        "cpu": ("default", "default", "multiworker"),
        "1gpu": ("default", "default", "multiworker"),
        "2gpu": ("mirrored", "mirrored", "multiworker"),
        "tpu": ("tpu", "tpu", ERROR),
    },
    "none": {
        "cpu": ("default", "default", ERROR),
        "1gpu": ("default", "default", ERROR),
        "2gpu": ("default", "default", ERROR),
        "tpu": ("default", "default", ERROR),
    },
    "mirrored": {
        "cpu": ("mirrored", "mirrored", ERROR),
        "1gpu": ("mirrored", "mirrored", ERROR),
        "2gpu": ("mirrored", "mirrored", ERROR),
        "tpu": ("mirrored", "mirrored", ERROR),
    },
    "multiworker": {
        "cpu": (ERROR, ERROR, "multiworker"),
        "1gpu": (ERROR, ERROR, "multiworker"),
        "2gpu": (ERROR, ERROR, "multiworker"),
        "tpu": (ERROR, ERROR, "multiworker"),
    },
    "tpu": {
        "cpu": (ERROR, ERROR, ERROR),
        "1gpu": (ERROR, ERROR, ERROR),
        "2gpu": (ERROR, ERROR, ERROR),
        "tpu": ("tpu", "tpu", ERROR),
    },
}
MATRIX = [
    (flag, kind, cluster_name, EXPECTED_STRATEGY[flag][kind][i])
    for flag, kind in itertools.product(EXPECTED_STRATEGY, DEVICE_KINDS)
    for i, cluster_name in enumerate(CLUSTERS)
]


@pytest.mark.parametrize("flag,kind,cluster_name,expected", MATRIX)
def test_strategy_matrix(flag, kind, cluster_name, expected):
    kwargs = dict(devices=DEVICE_KINDS[kind], cluster=CLUSTERS[cluster_name], distribution=flag)
    if expected == ERROR:
        assert_user_error("--distribution", **kwargs)
    else:
        result = plan(**kwargs)
        assert result.strategy == expected
        assert any(line.startswith(f"strategy: {expected}") for line in result.reasons)


def test_auto_on_a_tpu_vm_with_tf_config_error_says_multi_host_tpu_is_unsupported():
    assert "multi-host TPU" in assert_user_error("--distribution", devices=TPU_VM, cluster=multi())


def test_multiworker_without_tf_config_error_names_tf_config():
    assert "TF_CONFIG" in assert_user_error("--distribution", distribution="multiworker")


def test_tpu_without_a_tpu_error_explains_how_to_point_at_one():
    assert "TPU_NAME" in assert_user_error("--distribution", distribution="tpu", devices=GPU_V100)


def test_parameter_server_cluster_is_rejected():
    cluster = {
        "cluster": {"chief": ["m0:1"], "worker": ["m1:1"], "ps": ["m2:1"]},
        "task": {"type": "worker", "index": 0},
    }
    assert "ps" in assert_user_error("--distribution", cluster=cluster)


def test_mirrored_with_one_device_is_allowed_and_says_one_replica():
    result = plan(distribution="mirrored", devices=CPU)
    assert any("one replica" in line for line in result.reasons)


def test_unused_tpu_is_mentioned_in_reasons():
    result = plan(distribution="none", devices=TPU_VM)
    assert any("TPU is attached" in line and "unused" in line for line in result.reasons)


def test_unused_tpu_means_host_rules_for_precision_jit_and_padding():
    result = plan(distribution="none", devices=TPU_VM)
    assert (result.precision, result.jit_compile, result.sequence_padding, result.static_shapes) == (
        "float32",
        False,
        "bucket",
        False,
    )


# --- role from TF_CONFIG -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "cluster,role",
    [
        (None, ("chief", 0, True)),
        (SINGLE, ("chief", 0, True)),
        (multi("chief", 0), ("chief", 0, True)),
        (multi("worker", 0), ("worker", 0, False)),
        ({"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 0}}, ("worker", 0, True)),
        ({"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 1}}, ("worker", 1, False)),
    ],
)
def test_role_comes_from_tf_config(cluster, role):
    result = plan(cluster=cluster)
    assert (result.task_type, result.task_index, result.is_chief) == role


def test_role_from_vertex_cluster_spec_without_tf_config():
    spec = {
        "cluster": {"workerpool0": ["m0:1"], "workerpool1": ["m1:1", "m2:1"]},
        "task": {"type": "workerpool1", "index": 1},
    }
    result = plan(cluster=vertex.parse_cluster({"CLUSTER_SPEC": json.dumps(spec)}))
    assert (result.strategy, result.task_type, result.task_index, result.is_chief) == (
        "multiworker",
        "worker",
        1,
        False,
    )


def test_multiworker_reasons_log_the_role():
    result = plan(cluster=multi("worker", 0))
    assert any(line.startswith("role: worker 0 of 2") and "not chief" in line for line in result.reasons)


# --- precision ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "devices,expected",
    [
        (CPU, "float32"),
        (CPU_BF16, "mixed_bfloat16"),
        (GPU_V100, "mixed_float16"),
        (GPU_2xV100, "mixed_float16"),
        (GPU_A100, "mixed_float16"),
        (GPU_2xK80, "float32"),
        (GPU_MIXED, "float32"),
        (Devices("gpu", gpu_count=1), "float32"),  # compute capability unknown (ROCm)
        (TPU_VM, "mixed_bfloat16"),
        (TPU_NODE, "mixed_bfloat16"),
    ],
)
def test_auto_precision_per_device(devices, expected):
    assert plan(devices=devices).precision == expected


@pytest.mark.parametrize(
    "flag,devices,expected",
    [
        ("off", CPU_BF16, "float32"),
        ("off", GPU_V100, "float32"),
        ("off", TPU_VM, "float32"),
        ("float16", GPU_V100, "mixed_float16"),
        ("bfloat16", CPU_BF16, "mixed_bfloat16"),
        ("bfloat16", GPU_A100, "mixed_bfloat16"),
        ("bfloat16", TPU_VM, "mixed_bfloat16"),
    ],
)
def test_explicit_precision_is_honoured(flag, devices, expected):
    assert plan(devices=devices, mixed_precision=flag).precision == expected


def test_float16_on_tpu_is_an_error():
    assert "bfloat16" in assert_user_error("--mixed-precision", devices=TPU_VM, mixed_precision="float16")


@pytest.mark.parametrize("devices", [CPU, CPU_BF16])
def test_float16_on_cpu_is_an_error_suggesting_bfloat16_or_off(devices):
    message = assert_user_error("--mixed-precision", devices=devices, mixed_precision="float16")
    assert "bfloat16" in message and "off" in message


@pytest.mark.parametrize("devices", [CPU, GPU_V100])
def test_bfloat16_without_native_support_is_allowed_with_a_slowness_note(devices):
    result = plan(devices=devices, mixed_precision="bfloat16")
    assert result.precision == "mixed_bfloat16"
    assert any("emulated" in line for line in result.reasons)


def test_float16_below_compute_capability_7_is_allowed_with_a_note():
    result = plan(devices=GPU_2xK80, mixed_precision="float16")
    assert result.precision == "mixed_float16"
    assert any("Tensor Cores" in line for line in result.reasons)


def test_hub_on_cpu_bf16_is_rewritten_by_grappler():
    result = plan(devices=CPU_BF16, backend="hub")
    assert result.precision == "mixed_bfloat16"
    assert any("auto_mixed_precision_onednn_bfloat16" in line for line in result.reasons)


def test_hub_on_gpu_float16_is_rewritten_by_grappler():
    result = plan(devices=GPU_V100, backend="hub", freeze=True)
    assert result.precision == "mixed_float16"
    assert any("grappler auto_mixed_precision pass" in line for line in result.reasons)


def test_hub_on_tpu_auto_stays_float32():
    assert plan(devices=TPU_VM, backend="hub", freeze=True).precision == "float32"


@pytest.mark.parametrize("devices", [TPU_VM, GPU_A100])
def test_hub_bfloat16_off_cpu_is_an_error(devices):
    assert "--encoder-backend native" in assert_user_error(
        "--mixed-precision", devices=devices, backend="hub", freeze=True, mixed_precision="bfloat16"
    )


# --- XLA -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "devices,backend,freeze,expected",
    [
        (CPU, "native", False, False),
        (CPU_BF16, "native", False, False),
        (GPU_V100, "native", False, True),
        (GPU_2xV100, "native", True, True),
        (TPU_VM, "native", False, True),
        (GPU_V100, "hub", False, False),
        (GPU_V100, "hub", True, False),
        (TPU_VM, "hub", False, False),
        (CPU, "hub", True, False),
    ],
)
def test_auto_jit(devices, backend, freeze, expected):
    assert plan(devices=devices, backend=backend, freeze=freeze).jit_compile is expected


def test_jit_on_is_honoured_on_cpu_with_a_slowdown_note():
    result = plan(jit_compile="on")
    assert result.jit_compile is True
    assert any("slower" in line for line in result.reasons)


def test_jit_on_with_frozen_hub_encoder_is_allowed():
    assert plan(devices=GPU_V100, backend="hub", freeze=True, jit_compile="on").jit_compile


def test_jit_on_with_trained_hub_encoder_is_an_error():
    assert_user_error("--jit-compile", devices=GPU_V100, backend="hub", jit_compile="on")


def test_jit_off_is_honoured_on_gpu():
    assert plan(devices=GPU_V100, jit_compile="off").jit_compile is False


# --- padding and static shapes -----------------------------------------------------------------


@pytest.mark.parametrize(
    "devices,flag,expected",
    [
        (CPU, "auto", "bucket"),
        (GPU_V100, "auto", "bucket"),
        (TPU_VM, "auto", "fixed"),
        (CPU, "fixed", "fixed"),
        (GPU_V100, "bucket", "bucket"),
        (TPU_VM, "fixed", "fixed"),
    ],
)
def test_sequence_padding(devices, flag, expected):
    assert plan(devices=devices, sequence_padding=flag).sequence_padding == expected


def test_bucket_padding_on_tpu_is_an_error():
    assert_user_error("--sequence-padding", devices=TPU_VM, sequence_padding="bucket")


def test_bucket_padding_with_static_shapes_on_is_an_error():
    assert_user_error("--sequence-padding", static_shapes="on", sequence_padding="bucket")


def test_bucketing_under_xla_notes_one_compile_per_length():
    assert any("once per bucket length" in line for line in plan(devices=GPU_V100).reasons)


@pytest.mark.parametrize("devices,expected", [(CPU, False), (GPU_2xV100, False), (TPU_VM, True)])
def test_auto_static_shapes_only_on_tpu(devices, expected):
    assert plan(devices=devices).static_shapes is expected


@pytest.mark.parametrize("devices", [CPU, GPU_2xV100])
def test_static_shapes_on_gives_a_host_the_tpu_input_path(devices):
    result = plan(devices=devices, static_shapes="on")
    assert (result.static_shapes, result.sequence_padding) == (True, "fixed")
    assert any(line.startswith("static_shapes: on") and "weight-0" in line for line in result.reasons)


def test_static_shapes_off_on_tpu_is_an_error():
    assert "auto or on" in assert_user_error("--static-shapes", devices=TPU_VM, static_shapes="off")


def test_static_shapes_off_is_honoured_for_an_unused_tpu():
    assert plan(devices=TPU_VM, distribution="none", static_shapes="off").static_shapes is False


def test_tpu_with_one_step_per_execution_suggests_more():
    assert any("--steps-per-execution" in line for line in plan(devices=TPU_VM).reasons)


def test_every_choice_has_a_reason():
    reasons = plan(devices=GPU_2xV100).reasons
    for prefix in ("strategy:", "precision:", "jit_compile:", "static_shapes:", "sequence_padding:"):
        assert any(line.startswith(prefix) for line in reasons), prefix


# --- TPU node paths ----------------------------------------------------------------------------


def test_tpu_node_rejects_a_local_path_naming_its_flag():
    with pytest.raises(UserError, match="--training-file"):
        check_tpu_paths(
            plan(devices=TPU_NODE), TPU_NODE, {"--job-dir": "gs://b/job", "--training-file": "gs://b/a.csv,data/b.csv"}
        )


def test_tpu_node_accepts_gs_paths_and_skips_unset_ones():
    check_tpu_paths(plan(devices=TPU_NODE), TPU_NODE, {"--job-dir": "gs://b/job", "--validation-file": None})


@pytest.mark.parametrize("devices", [TPU_VM, CPU])
def test_local_paths_are_fine_without_a_tpu_node(devices):
    check_tpu_paths(plan(devices=devices), devices, {"--job-dir": "runs/x"})


def test_unused_tpu_node_does_not_restrict_paths():
    check_tpu_paths(plan(devices=TPU_NODE, distribution="none"), TPU_NODE, {"--job-dir": "runs/x"})


# --- detection ---------------------------------------------------------------------------------

CPUINFO = textwrap.dedent("""\
    processor\t: 0
    model name\t: Some CPU
    flags\t\t: fpu sse2 avx2 avx512f {extra}
    bugs\t\t: spectre_v1

    processor\t: 1
    flags\t\t: fpu sse2 avx2 avx512f {extra}
    """)


@pytest.mark.parametrize(
    "extra,expected",
    [
        ("avx512_bf16 amx_tile amx_bf16", True),
        ("avx512_bf16", True),
        ("amx_bf16", True),
        ("avx512_vnni avx512_fp16", False),
        ("", False),
    ],
)
def test_cpu_bf16_from_cpuinfo_flags(extra, expected):
    assert cpu_has_native_bf16(CPUINFO.format(extra=extra)) is expected


def test_cpu_bf16_ignores_the_word_outside_the_flags_line():
    assert not cpu_has_native_bf16("model name\t: avx512_bf16 lookalike\nflags\t: fpu\n")


def test_detect_devices_reads_given_cpuinfo(tmp_path):
    devices = detect_devices({}, CPUINFO.format(extra="amx_bf16"), dev_dir=str(tmp_path))
    assert devices == Devices("cpu", cpu_bf16=True)


def test_detect_devices_reports_a_tpu_node_from_tpu_name(tmp_path):
    devices = detect_devices({"TPU_NAME": "grpc://10.0.0.2:8470"}, "", dev_dir=str(tmp_path))
    assert (devices.platform, devices.tpu, devices.remote_tpu) == ("tpu", "grpc://10.0.0.2:8470", True)


@pytest.mark.parametrize(
    "entries,environ,expected",
    [
        ([], {}, None),
        (["accel0"], {}, "local"),  # TPU v2-v4 VM
        (["vfio/0", "vfio/vfio"], {}, "local"),  # TPU v5e+ VM
        (["vfio/vfio"], {}, None),  # vfio control node alone: no device
        (["accel/accel0"], {}, None),  # Linux compute-accelerator class, not a TPU
        (["accel0"], {"TPU_NAME": "my-tpu-vm"}, "local"),  # tensorflow/tensorflow#53296
        ([], {"TPU_NAME": "local"}, "local"),
        ([], {"TPU_NAME": "my-node"}, "my-node"),
        ([], {"KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS": "grpc://1.2.3.4:8470", "TPU_NAME": "x"}, "grpc://1.2.3.4:8470"),
        ([], {"TPU_NAME": "  "}, None),
    ],
)
def test_find_tpu(tmp_path, entries, environ, expected):
    for entry in entries:
        (tmp_path / entry).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / entry).touch()
    assert find_tpu(environ, str(tmp_path)) == expected


# --- real strategies on this CPU -----------------------------------------------------------------


@pytest.fixture
def restore_precision():
    yield
    import tensorflow as tf
    import tf_keras

    tf_keras.mixed_precision.set_global_policy("float32")
    tf.config.optimizer.set_experimental_options(
        {"auto_mixed_precision": False, "auto_mixed_precision_onednn_bfloat16": False}
    )


def test_default_plan_creates_the_default_strategy_and_sets_the_policy(restore_precision):
    import tensorflow as tf
    import tf_keras

    devices = detect_devices(os.environ)
    result = plan(devices=devices, mixed_precision="bfloat16")
    strategy = create_strategy(result, devices)
    assert strategy is tf.distribute.get_strategy()
    assert "mixed_bfloat16" in apply_precision(result, "native")
    assert tf_keras.mixed_precision.global_policy().name == "mixed_bfloat16"
    recorded = describe(result, strategy)
    assert (recorded["replicas"], recorded["devices"], recorded["strategy"]) == (1, ["/device:CPU:0"], "default")


def test_hub_precision_keeps_keras_float32_and_enables_the_rewrite(restore_precision):
    import tensorflow as tf
    import tf_keras

    description = apply_precision(plan(devices=CPU_BF16, backend="hub"), "hub")
    assert "auto_mixed_precision_onednn_bfloat16" in description
    assert tf_keras.mixed_precision.global_policy().name == "float32"
    assert tf.config.optimizer.get_experimental_options()["auto_mixed_precision_onednn_bfloat16"]


def run_python(code, env=None, timeout=120):
    env = dict(os.environ, **(env or {}), PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.Popen(
        [sys.executable, "-c", code], env=env, cwd=REPO, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )


WORKER_PRELUDE = """
import json, os
import trainer
from trainer.vertex import environment as vertex
from trainer.training import distribution
from trainer.config import RuntimeConfig
devices = distribution.detect_devices(os.environ)  # must leave the runtime uninitialised
import tensorflow as tf
"""


def test_mirrored_over_two_logical_cpus_after_detection():
    code = (
        WORKER_PRELUDE
        + """
cpu, = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
plan = distribution.plan_runtime(RuntimeConfig(distribution="mirrored"), devices=devices,
                                 cluster=None, encoder_backend="native", freeze_encoder=False)
strategy = distribution.create_strategy(plan, devices)
distribution.apply_precision(plan, "native")
total = strategy.reduce("SUM", strategy.run(lambda: tf.constant(1.0)), axis=None)
print(json.dumps({"replicas": strategy.num_replicas_in_sync, "sum": float(total),
                  "devices": distribution.describe(plan, strategy)["devices"]}))
"""
    )
    process = run_python(code)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err[-2000:]
    assert json.loads(out.splitlines()[-1]) == {
        "replicas": 2,
        "sum": 2.0,
        "devices": ["/job:localhost/replica:0/task:0/device:CPU:0", "/job:localhost/replica:0/task:0/device:CPU:1"],
    }


def test_tpu_plan_on_a_host_without_tpu_fails_fast_with_a_user_error():
    code = (
        WORKER_PRELUDE
        + """
devices = distribution.Devices("tpu", tpu="local")
plan = distribution.plan_runtime(RuntimeConfig(), devices=devices, cluster=None,
                                 encoder_backend="native", freeze_encoder=False)
try:
    distribution.create_strategy(plan, devices)
except trainer.errors.UserError as error:
    print(error)
"""
    )
    process = run_python(code)  # connecting changes the global context: not in this process
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err[-2000:]
    assert out.startswith("--distribution tpu: cannot connect to the TPU 'local'")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_multiworker_on_two_local_processes_after_detection():
    code = (
        WORKER_PRELUDE
        + """
tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
plan = distribution.plan_runtime(RuntimeConfig(), devices=devices,
                                 cluster=vertex.parse_cluster(os.environ),
                                 encoder_backend="native", freeze_encoder=False)
strategy = distribution.create_strategy(plan, devices)
value = strategy.run(lambda: tf.constant(float(plan.task_index + 1)))
total = strategy.reduce("SUM", value, axis=None)
print(json.dumps({"strategy": plan.strategy, "chief": plan.is_chief, "sum": float(total),
                  "replicas": strategy.num_replicas_in_sync,
                  "devices": distribution.describe(plan, strategy)["devices"]}))
"""
    )
    workers = [f"127.0.0.1:{free_port()}" for _ in range(2)]
    processes = [
        run_python(
            code, {"TF_CONFIG": json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": i}})}
        )
        for i in range(2)
    ]
    try:
        outputs = [process.communicate(timeout=120) for process in processes]
    finally:
        for process in processes:  # a worker whose peer died waits for it: do not leak it
            process.kill()
    for process, (_, err) in zip(processes, outputs):
        assert process.returncode == 0, err[-2000:]
    results = [json.loads(out.splitlines()[-1]) for out, _ in outputs]
    assert results == [
        {
            "strategy": "multiworker",
            "chief": i == 0,
            "sum": 3.0,
            "replicas": 2,
            "devices": [f"/job:worker/replica:0/task:{i}/device:CPU:0"],
        }
        for i in range(2)
    ]


# --- the TPU input path and steps per execution, in real runs on CPU (slow tier) ---------------


@pytest.fixture(scope="module")
def tpu_path_runs(tiny_encoder_dir, tiny_data, tmp_path_factory):
    """Three short runs at once: static shapes with an evaluation batch (8) that divides none of
    the splits (90/30/30), --steps-per-execution 5 over 12 steps per epoch, and a plain run."""
    from test_task import train_args

    root = tmp_path_factory.mktemp("tpu_path")
    extra = {
        "static": ["--static-shapes", "on", "--eval-batch-size", "8"],
        "steps5": ["--steps-per-execution", "5", "--log-every-seconds", "0.01"],
        "plain": [],
    }
    env = {**os.environ, "VBT_CACHE_DIR": os.environ.get("VBT_CACHE_DIR", "/tmp/vbt-test-cache")}
    processes = {
        name: subprocess.Popen(
            [
                sys.executable,
                "-m",
                "trainer.task",
                *map(str, train_args(tiny_encoder_dir, tiny_data, root / name, "--epochs", "2", *flags)),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        for name, flags in extra.items()
    }
    try:
        outputs = {name: process.communicate(timeout=300)[0] for name, process in processes.items()}
    finally:
        for process in processes.values():
            process.kill()
    for name, process in processes.items():
        assert process.returncode == 0, f"{name}:\n{outputs[name][-3000:]}"
    return {
        name: {
            "dir": root / name,
            "log": outputs[name],
            "metrics": json.loads((root / name / "metrics.json").read_text()),
        }
        for name in extra
    }


@pytest.mark.slow
def test_static_shapes_train_on_full_batches_of_one_length(tpu_path_runs):
    run = tpu_path_runs["static"]
    assert "11 steps per epoch" in run["log"] and "padding to 16" in run["log"]  # 90 // 8
    assert run["metrics"]["device"]["static_shapes"] is True


@pytest.mark.slow
def test_static_shapes_evaluate_every_example_exactly_once(tpu_path_runs):
    metrics = tpu_path_runs["static"]["metrics"]
    for split, size in metrics["dataset_sizes"].items():
        assert size % 8 and metrics[split]["examples"] == size, split
        assert sum(map(sum, metrics[split]["confusion_matrix"])) == size, split


@pytest.mark.slow
def test_static_shapes_export_still_takes_raw_strings(tpu_path_runs):
    import tensorflow as tf

    from trainer.serving import export

    serve = export.load(str(tpu_path_runs["static"]["dir"] / "model"))
    out = serve(text=tf.constant(["i love this movie", "so bad !", "UNSEEN words", ""]))
    assert out["probabilities"].shape == (4, 3)
    assert {x.decode() for x in out["label"].numpy()} <= {"negative", "neutral", "positive"}


@pytest.mark.slow
def test_steps_per_execution_trains_like_one_step_per_call(tpu_path_runs):
    got, expected = tpu_path_runs["steps5"]["metrics"], tpu_path_runs["plain"]["metrics"]
    for split in ("train", "validation", "test"):
        assert got[split]["loss"] == pytest.approx(expected[split]["loss"], rel=1e-5), split


@pytest.mark.slow
def test_progress_lines_count_steps_per_execution(tpu_path_runs):
    # Keras calls on_train_batch_end once per execution, with the index of its last step; the
    # last execution of an epoch is cut to the epoch's end (12 = 5 + 5 + 2).
    steps = {
        line.split("step ")[1].split()[0]
        for line in tpu_path_runs["steps5"]["log"].splitlines()
        if " step " in line and "ETA" in line
    }
    assert steps and steps <= {"5/12", "10/12", "12/12"}
