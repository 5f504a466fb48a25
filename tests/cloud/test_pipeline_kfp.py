"""python -m trainer.pipeline: the KFP v2 loop train -> evaluate -> gate -> register -> deploy.

The gate and the command line are checked here in-process; the compiled spec through KFP's own
loader; scripts/pipeline-cloud.sh's PipelineJob through aiplatform_v1's parser; the local run
(kfp.local, a real training of the packaged sample) in the slow tier.
"""

import json
import subprocess
import sys

import pytest
from conftest import ROOT
from test_scripts import run as run_script
from vertex_loopback import VertexLoopback

from trainer import cli, pipeline
from trainer import config as config_lib
from trainer.cloud import pipeline_gate, pipeline_local

IMAGE = "us-central1-docker.pkg.dev/my-project/vertex-bert-trainer/vertex-bert-trainer:abc1234"
SERVING_IMAGE = "us-central1-docker.pkg.dev/my-project/vertex-bert-trainer/vertex-bert-trainer-serve:abc1234"
VERTEX = [
    "--project",
    "my-project",
    "--region",
    "us-central1",
    "--bucket",
    "my-bucket",
    "--image-uri",
    IMAGE,
    "--serving-image-uri",
    SERVING_IMAGE,
]
CLOUD_DATA = ["--", "--training-file", "gs://my-bucket/data/train.csv"]
# The local runs' trainer settings: one epoch, no int8/bfloat16/ONNX copies or report (the
# sample reaches validation accuracy 0.9 in one epoch).
QUICK = [
    "--",
    "--epochs",
    "1",
    "--export-int8",
    "off",
    "--export-bfloat16",
    "off",
    "--export-onnx",
    "off",
    "--report",
    "off",
]
METRICS = {"validation": {"examples": 36, "loss": 0.53, "accuracy": 0.9167, "macro_f1": None}}


def pipeline_command(capsys, *argv):
    """(exit code, stdout, stderr lines) of `python -m trainer.pipeline ARGV`, run in-process."""
    code = cli.run(pipeline.main, list(argv))
    out, err = capsys.readouterr()
    return code, out, err.splitlines()


@pytest.mark.parametrize(
    "text, parts",
    [
        ("validation.accuracy>=0.5", ("validation", "accuracy", ">=", 0.5)),
        (" test.macro_f1 > .8 ", ("test", "macro_f1", ">", 0.8)),
        ("train.loss<=1e-1", ("train", "loss", "<=", 0.1)),
        ("validation.mae<2", ("validation", "mae", "<", 2.0)),
    ],
)
def test_a_gate_is_split_dot_metric_an_operator_and_a_threshold(text, parts):
    gate = pipeline_gate.parse(text)
    assert (gate.split, gate.metric, gate.op, gate.threshold) == parts


@pytest.mark.parametrize(
    "op, passes",
    [
        (">=", [False, True, True]),
        (">", [False, False, True]),
        ("<=", [True, True, False]),
        ("<", [True, False, False]),
    ],
)
def test_the_gate_compares_the_value_with_the_threshold_as_its_operator_says(op, passes):
    gate = pipeline_gate.parse(f"validation.accuracy{op}0.5")
    assert [gate.passes(value) for value in (0.4, 0.5, 0.6)] == passes


def test_a_gate_not_met_names_the_metric_its_value_and_the_threshold():
    verdict = pipeline_gate.parse("validation.accuracy>=0.95").verdict(0.9167)
    assert verdict == (
        "gate validation.accuracy>=0.95: not met: validation.accuracy is 0.9167, not >= "
        "the threshold 0.95; register and deploy did not run"
    )


def test_the_gated_value_comes_from_metrics_json_and_a_missing_metric_names_those_there():
    assert pipeline_gate.parse("validation.accuracy>=0.5").value_in(METRICS, "m.json") == 0.9167
    with pytest.raises(
        pipeline_gate.UserError,
        match=r"m.json has no validation.f1; its validation "
        r"metrics: accuracy, loss$",
    ):
        pipeline_gate.parse("validation.f1>=0.5").value_in(METRICS, "m.json")


def test_a_metric_metrics_json_wrote_as_null_does_not_pass_the_gate():
    with pytest.raises(pipeline_gate.GateNotMet, match="validation.macro_f1 is None in m.json, not a finite number"):
        pipeline_gate.parse("validation.macro_f1>=0.5").value_in(METRICS, "m.json")


@pytest.mark.parametrize(
    "gate, message",
    [
        (
            "accuracy>=0.5",
            "--gate: expected SPLIT.METRIC OP THRESHOLD with OP one of >=, >, <=, < "
            "(e.g. 'validation.accuracy>=0.5'), got 'accuracy>=0.5'",
        ),
        (
            "validation.accuracy=>0.5",
            "--gate: expected SPLIT.METRIC OP THRESHOLD with OP one of >=, >, <=, < "
            "(e.g. 'validation.accuracy>=0.5'), got 'validation.accuracy=>0.5'",
        ),
        ("dev.accuracy>=0.5", "--gate dev.accuracy>=0.5: unknown split 'dev'; one of train, validation, test"),
        (
            "validation.spearman>=0.5",
            "--gate validation.spearman>=0.5: unknown metric 'spearman' for a "
            "classification run; one of accuracy, loss, macro_f1, macro_recall",
        ),
    ],
)
def test_a_bad_gate_is_one_error_line_before_anything_runs(capsys, tmp_path, gate, message):
    code, out, err = pipeline_command(capsys, "run", "--local", "--gate", gate, "--job-dir", str(tmp_path / "run"))
    assert (code, err) == (2, [f"error: {message}"])
    assert not (tmp_path / "run").exists()


def test_a_gate_on_test_needs_data_with_a_test_split(capsys, tmp_path):
    code, _, err = pipeline_command(
        capsys, "run", "--local", "--gate", "test.accuracy>=0.5", "--", "--training-file", str(tmp_path / "train.csv")
    )
    assert (code, err) == (
        2,
        [
            "error: --gate test.accuracy>=0.5: the run has no test split; pass the "
            "trainer --testing-file or gate on validation"
        ],
    )


def test_a_canary_without_its_endpoint_is_refused_before_training(capsys, tmp_path):
    code, _, err = pipeline_command(
        capsys,
        "run",
        "--local",
        "--gate",
        "validation.accuracy>=0.5",
        "--traffic-percent",
        "10",
        "--job-dir",
        str(tmp_path / "run"),
    )
    assert code == 2 and len(err) == 1 and err[0].startswith("error: --traffic-percent: a canary shares")
    assert not (tmp_path / "run").exists()


def test_a_local_run_refuses_the_flags_only_vertex_uses(capsys):
    code, _, err = pipeline_command(
        capsys, "run", "--local", "--gate", "validation.accuracy>=0.5", "--bucket", "my-bucket"
    )
    assert (code, err) == (
        2,
        [
            "error: --bucket: not used by a local run (run --local trains on this "
            "machine and dry-runs register and deploy); drop it or drop --local"
        ],
    )


def test_a_local_run_into_a_finished_run_is_refused_with_exit_2_before_kfp_starts(capsys, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    config_lib.save(config_lib.build_config(["--job-dir", str(run)], environ={}), str(run / "config.json"))
    (run / "metrics.json").write_text(json.dumps(METRICS))
    code, out, err = pipeline_command(
        capsys, "run", "--local", "--gate", "validation.accuracy>=0.5", "--job-dir", str(run)
    )
    assert (code, err) == (
        2,
        [
            f"error: --job-dir: {run} holds a finished run ({run / 'metrics.json'}). "
            f"Pass --overwrite to replace it, or choose another --job-dir."
        ],
    )
    assert "Running pipeline" not in out


def kfp_log_line():
    """A line kfp.local logs as it does (kfp/local/task_dispatcher.py), its names coloured."""
    import logging

    from kfp.local import logging_utils, status

    with logging_utils.local_logger_context():
        logging.info(
            f"Task {logging_utils.format_task_name('train')} finished with status "
            f"{logging_utils.format_status(status.Status.SUCCESS)}"
        )


def test_kfp_local_logs_no_colour_codes_when_stdout_is_not_a_terminal(capsys):
    with pipeline_local.colours_for_terminals_only():
        kfp_log_line()
    out = capsys.readouterr().out
    assert out.endswith(" - INFO - Task 'train' finished with status SUCCESS\n") and "\x1b" not in out, out


def test_kfp_local_keeps_its_colours_on_a_terminal(capsys, monkeypatch):
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    with pipeline_local.colours_for_terminals_only():
        kfp_log_line()
    assert "\x1b[92mSUCCESS\x1b[0m" in capsys.readouterr().out


def test_compile_names_every_vertex_flag_it_needs(capsys, tmp_path):
    code, _, err = pipeline_command(
        capsys,
        "compile",
        "--output",
        str(tmp_path / "p.yaml"),
        "--gate",
        "validation.accuracy>=0.5",
        "--project",
        "my-project",
    )
    assert (code, err) == (2, ["error: --region, --bucket, --image-uri, --serving-image-uri: required for compile"])
    assert not (tmp_path / "p.yaml").exists()


def test_without_kfp_the_command_says_which_extra_to_install():
    code = (
        "import sys; sys.modules['kfp'] = None; from trainer import cli, pipeline; "
        "sys.exit(cli.run(pipeline.main, ['run', '--local', '--gate', 'validation.accuracy>=0.5']))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert (result.returncode, result.stderr.splitlines()) == (
        2,
        [
            "error: python -m trainer.pipeline needs KFP, the `pipeline` extra: pip install "
            "'vertex-bert-trainer[pipeline]' (or pip install kfp==2.17.3)"
        ],
    )


def test_compile_writes_a_spec_kfps_own_loader_reads_with_deploy_under_the_gate(capsys, tmp_path):
    from kfp import components

    spec = tmp_path / "pipeline.yaml"
    code, out, err = pipeline_command(
        capsys,
        "compile",
        "--output",
        str(spec),
        "--gate",
        "validation.macro_f1>=0.8",
        *VERTEX,
        "--parent-model",
        "123",
        "--endpoint",
        "456",
        "--traffic-percent",
        "10",
        *CLOUD_DATA,
    )
    assert code == 0, err
    loaded = components.load_component_from_file(str(spec)).pipeline_spec
    tasks = loaded.root.dag.tasks
    assert set(tasks) == {"train", "evaluate", "gate", "condition-1"}
    assert (
        tasks["condition-1"].trigger_policy.condition
        == "inputs.parameter_values['pipelinechannel--gate-Output'] == true"
    )
    branch = loaded.components[tasks["condition-1"].component_ref.name].dag.tasks
    assert list(branch) == ["register-and-deploy"]
    constant = branch["register-and-deploy"].inputs.parameters["args"].runtime_value.constant
    deploy_args = [value.string_value for value in constant.list_value.values]
    assert deploy_args[deploy_args.index("--traffic-percent") + 1] == "10" and "--dry-run" not in deploy_args
    assert loaded.root.input_definitions.parameters["gate"].default_value.string_value == "validation.macro_f1>=0.8"


@pytest.mark.slow  # the script compiles the pipeline in its own process (about 15 s); CI runs it on 2.21 (.ci/run)
def test_pipeline_cloud_sh_dry_run_prints_a_pipeline_job_aiplatform_v1_parses():
    from google.cloud import aiplatform_v1

    result = run_script(
        "pipeline-cloud.sh",
        "--training-file",
        "gs://my-bucket/data/train.csv",
        DRY_RUN="1",
        PROJECT_ID="my-project",
        REGION="us-central1",
        BUCKET="my-bucket",
        IMAGE_URI=IMAGE,
        SERVING_IMAGE_URI=SERVING_IMAGE,
        GATE="validation.accuracy>=0.5",
        SCHEDULING="spot",
        JOB_DIR="gs://my-bucket/runs/loop",
        PARENT_MODEL="123",
        ENDPOINT="456",
        PROMOTE="1",
    )
    assert result.returncode == 0, result.stderr
    job = aiplatform_v1.PipelineJob.from_json(result.stdout)
    assert dict(job.runtime_config.parameter_values) == {
        "job_dir": "gs://my-bucket/runs/loop",
        "gate": "validation.accuracy>=0.5",
    }
    assert job.runtime_config.gcs_output_directory == "gs://my-bucket/vertex-bert-trainer/pipelines"
    tasks = job.pipeline_spec["root"]["dag"]["tasks"]
    submit_args = tasks["train"]["inputs"]["parameters"]["submit_args"]["runtimeValue"]["constant"]
    assert submit_args[submit_args.index("--scheduling") + 1] == "spot"
    assert "--image-uri" in submit_args and IMAGE in submit_args


def test_run_on_vertex_submits_the_pipeline_job_its_dry_run_prints(capsys, monkeypatch):
    from google.cloud.aiplatform.utils import gcs_utils

    # PipelineJob.submit first checks (or creates) the pipeline root's bucket through Cloud
    # Storage and Resource Manager, which the loopback does not serve: recorded instead.
    buckets = []
    monkeypatch.setattr(
        gcs_utils,
        "create_gcs_bucket_for_pipeline_artifacts_if_it_does_not_exist",
        lambda **kwargs: buckets.append(kwargs["output_artifacts_gcs_dir"]),
    )
    argv = [
        "run",
        "--gate",
        "validation.accuracy>=0.5",
        *VERTEX,
        "--display-name",
        "loop-1",
        "--service-account",
        "loop@my-project.iam.gserviceaccount.com",
        *CLOUD_DATA,
    ]
    code, printed, err = pipeline_command(capsys, *argv[:1], "--dry-run", *argv[1:])
    assert code == 0, err
    with VertexLoopback() as server:
        with server.pointed_at(project="my-project", location="us-central1"):
            code, out, err = pipeline_command(capsys, *argv)
    assert code == 0, err
    [create] = server.find("POST", "/pipelineJobs")
    assert create.query["pipelineJobId"] == "loop-1"
    assert create.body == json.loads(printed)
    assert buckets == ["gs://my-bucket/vertex-bert-trainer/pipelines"]
    assert out.splitlines()[-1] == (
        "submitted pipeline job projects/my-project/locations/us-central1/pipelineJobs/"
        "loop-1; the run goes to gs://my-bucket/vertex-bert-trainer/loop-1"
    )


def test_pipeline_cloud_sh_names_a_missing_gate_and_submits_nothing():
    result = run_script(
        "pipeline-cloud.sh",
        DRY_RUN="1",
        PROJECT_ID="my-project",
        REGION="us-central1",
        BUCKET="my-bucket",
        IMAGE_URI=IMAGE,
        SERVING_IMAGE_URI=SERVING_IMAGE,
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert "GATE" in result.stderr


def printed_requests(stdout):
    """The JSON trainer.deploy --dry-run printed, in the step's log (which kfp.local indents)."""
    lines = stdout.splitlines()
    start = lines.index("    {", next(i for i, line in enumerate(lines) if "Dry run: these requests" in line))
    return json.loads("\n".join(lines[start : lines.index("    }", start) + 1]))


def local_run(tmp_path, gate, *flags):
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "trainer.pipeline",
            "run",
            "--local",
            "--gate",
            gate,
            "--job-dir",
            str(tmp_path / "run"),
            *flags,
            *QUICK,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=900,
    )


@pytest.mark.slow
def test_a_local_run_trains_the_sample_passes_the_gate_and_dry_runs_the_canary(tmp_path):
    result = local_run(
        tmp_path,
        "validation.accuracy>=0.5",
        "--parent-model",
        "123",
        "--version-aliases",
        "candidate",
        "--endpoint",
        "456",
        "--traffic-percent",
        "10",
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert f"passed: validation.accuracy is {metrics['validation']['accuracy']:.4g}" in result.stdout
    requests = printed_requests(result.stdout)
    assert requests["uploadModel"]["parentModel"].endswith("/models/123")
    assert requests["uploadModel"]["model"]["versionAliases"] == ["candidate"]
    assert requests["deployModel"]["trafficSplit"] == {"0": 10, "DEPLOYED_MODELS_SERVING_NOW": 90}


@pytest.mark.slow  # run by hand (.ci/run's BY_HAND, docs/testing.md), not in CI
def test_an_impossible_gate_exits_1_naming_the_value_and_register_and_deploy_never_run(tmp_path):
    result = local_run(tmp_path, "validation.accuracy>1")
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr
    assert result.stderr.splitlines()[-1] == (
        f"error: gate validation.accuracy>1: not met: validation.accuracy is "
        f"{metrics['validation']['accuracy']:.4g}, not > the threshold 1; register and deploy did not run"
    )
    assert "register-and-deploy" not in result.stdout and "uploadModel" not in result.stdout
