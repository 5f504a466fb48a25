"""Submit the trainer image to Vertex AI: `python -m trainer.submit {train,tune} [flags] -- [trainer flags]`.

Pure functions build the worker pools, the metric spec and the parameter specs; `build_job`
wraps them in the SDK's `aiplatform.CustomJob` / `aiplatform.HyperparameterTuningJob`, which only
assembles protobufs and needs no network. `main` then either submits the job or, with --dry-run,
prints `job.to_dict()`: the exact resource the SDK would send (REST JSON of a CustomJob or a
HyperparameterTuningJob), built by the same code as a real submission.

Outputs: the job's base output directory is --job-dir, so Vertex gives the trainer
AIP_MODEL_DIR=JOB_DIR/model/, AIP_CHECKPOINT_DIR=JOB_DIR/checkpoints/ and
AIP_TENSORBOARD_LOG_DIR=JOB_DIR/logs/, and in a tuning job JOB_DIR/<trial id>/... per trial
(CustomJobSpec.base_output_directory, google/cloud/aiplatform_v1/types/custom_job.py). The trainer
derives every other path from those, so nothing passes --job-dir to the trainer itself.
"""

import argparse
import datetime
import json
import re
import sys
from collections.abc import Sequence

from trainer import cli, config, task_registry
from trainer.cloud import deployment, scheduling
from trainer.errors import UserError
from trainer.tuning import space
from trainer.vertex import api

DEFAULT_MACHINE_TYPE = "n1-standard-8"
DEFAULT_GPU = "NVIDIA_TESLA_T4"
# Vertex runs TPU v2/v3 training on TPU VMs with 8 cores, requested as this machine type, and v5e
# on ct5lp-hightpu-{1,4,8}t machines with that many chips; TensorFlow runs on no later TPU there
# (https://cloud.google.com/vertex-ai/docs/training/configure-compute#tpu, training-with-tpu-vm).
TPU_MACHINE_TYPE = "cloud-tpu"
TPU_ACCELERATORS = {"v2": "TPU_V2", "v3": "TPU_V3", "v5e": "TPU_V5_LITEPOD"}
TPU_CORES = 8
V5E_CHIPS = (1, 4, 8)
DEFAULT_V5E_CHIPS = 4  # as many chips as a v2-8 or v3-8 (8 cores, 2 per chip)
# TensorFlow runs on v5e only on the PJRT runtime, switched on by these (training-with-tpu-vm;
# /lib/libtpu.so is where Dockerfile.tpu links libtpu). v2/v3 keep TensorFlow's default runtime,
# so the job, which knows the generation, sets them rather than the image (see Dockerfile.tpu).
V5E_ENV = {
    "NEXT_PLUGGABLE_DEVICE_USE_C_API": "true",
    "TF_PLUGGABLE_DEVICE_LIBRARY_PATH": "/lib/libtpu.so",
    "PJRT_DEVICE": "TPU",
}


def tuning_parameters() -> dict:
    """The search space (trainer.tuning.space) as the SDK's parameter specs, keyed by flag name."""
    from google.cloud.aiplatform import hyperparameter_tuning as hpt

    def spec(dimension):
        if isinstance(dimension, space.Categorical):
            return hpt.CategoricalParameterSpec(values=list(dimension.values))
        return hpt.DoubleParameterSpec(min=dimension.low, max=dimension.high, scale=dimension.scale)

    return {name: spec(dimension) for name, dimension in space.SPACE.items()}


def metric_spec(metric: str) -> dict:
    """{metric: goal}, from the table the trainer's HypertuneReporter reports against."""
    if metric not in task_registry.metric_goals():
        raise UserError(
            f"--selection-metric: unknown metric {metric!r}; expected one of {sorted(task_registry.metric_goals())}"
        )
    return {metric: task_registry.metric_goals()[metric]}


def machine_spec(
    machine_type: str | None,
    accelerator_type: str | None,
    accelerator_count: int,
    tpu: str | None,
    tpu_chips: int | None = None,
) -> dict:
    """MachineSpec fields for one replica: CPU, GPUs, or a TPU VM."""
    if tpu:
        if machine_type or accelerator_type or accelerator_count:
            raise UserError(
                "--tpu: the TPU version sets the machine (and --tpu-chips its size on v5e); drop "
                "--machine-type, --accelerator-type and --accelerator-count"
            )
        return tpu_machine_spec(tpu, tpu_chips)
    if tpu_chips is not None:
        raise UserError("--tpu-chips needs --tpu v5e")
    spec = {"machine_type": machine_type or DEFAULT_MACHINE_TYPE}
    if accelerator_count < 0:
        raise UserError(f"--accelerator-count: must be >= 0, got {accelerator_count}")
    if accelerator_type:
        _check_accelerator(accelerator_type)
        spec.update(accelerator_type=accelerator_type, accelerator_count=accelerator_count or 1)
    elif accelerator_count:
        raise UserError("--accelerator-count needs --accelerator-type (e.g. NVIDIA_TESLA_T4)")
    return spec


def tpu_machine_spec(tpu: str, chips: int | None) -> dict:
    """v2/v3: one 8-core cloud-tpu VM. v5e: a ct5lp-hightpu-Nt machine, accelerator_count = N chips."""
    if tpu != "v5e":
        if chips is not None:
            raise UserError(f"--tpu-chips: TPU {tpu} comes as one 8-core VM; chips are chosen on v5e only")
        return {
            "machine_type": TPU_MACHINE_TYPE,
            "accelerator_type": TPU_ACCELERATORS[tpu],
            "accelerator_count": TPU_CORES,
        }
    chips = DEFAULT_V5E_CHIPS if chips is None else chips
    if chips not in V5E_CHIPS:
        raise UserError(f"--tpu-chips: Vertex offers TPU v5e with {', '.join(map(str, V5E_CHIPS))} chips, got {chips}")
    return {
        "machine_type": f"ct5lp-hightpu-{chips}t",
        "accelerator_type": TPU_ACCELERATORS[tpu],
        "accelerator_count": chips,
    }


def _check_accelerator(name: str) -> None:
    """Typos fail here with the valid names, not after an API round trip."""
    from google.cloud.aiplatform_v1.types import AcceleratorType

    gpus = sorted(n for n in AcceleratorType.__members__ if n.startswith("NVIDIA_"))
    if name.startswith("TPU_"):
        raise UserError(f"--accelerator-type {name}: use --tpu {', '.join(TPU_ACCELERATORS)} for TPUs")
    if name not in gpus:
        raise UserError(f"--accelerator-type: unknown GPU {name!r}; one of {', '.join(gpus)}")


def worker_pool_specs(
    image_uri: str,
    trainer_args: Sequence[str],
    *,
    machine_type: str | None = None,
    accelerator_type: str | None = None,
    accelerator_count: int = 0,
    replica_count: int = 0,
    tpu: str | None = None,
    tpu_chips: int | None = None,
) -> list:
    """Worker pools for `aiplatform.CustomJob`.

    Pool 0 is the chief (one replica); `replica_count` more machines of the same kind form pool 1,
    the workers. Vertex turns the pools into TF_CONFIG's chief and worker tasks, which is what
    MultiWorkerMirroredStrategy needs (https://cloud.google.com/vertex-ai/docs/training/distributed-training).
    """
    if not image_uri:
        raise UserError("--image-uri: required")
    if replica_count < 0:
        raise UserError(f"--replica-count: must be >= 0, got {replica_count}")
    if tpu and replica_count:
        raise UserError("--replica-count: a TPU job runs on one TPU VM; multi-worker jobs need CPU or GPU machines")
    spec = machine_spec(machine_type, accelerator_type, accelerator_count, tpu, tpu_chips)
    container = {"image_uri": image_uri, "args": list(trainer_args)}
    if tpu == "v5e":
        container["env"] = [{"name": name, "value": value} for name, value in V5E_ENV.items()]

    def pool(replicas):
        return {"machine_spec": dict(spec), "replica_count": replicas, "container_spec": dict(container)}

    return [pool(1)] + ([pool(replica_count)] if replica_count else [])


def staging_uri(bucket: str) -> str:
    """`my-bucket` or `gs://my-bucket[/prefix]` -> `gs://my-bucket[/prefix]`."""
    name = bucket.strip().removeprefix("gs://").strip("/")
    if not name or ":" in name:
        raise UserError(f"--bucket: expected a bucket name or gs://BUCKET[/PREFIX], got {bucket!r}")
    return "gs://" + name


def default_display_name(command: str, now: datetime.datetime) -> str:
    return f"vbt-{command}-{now:%Y%m%d-%H%M%S}"


def base_output_dir(job_dir: str | None, staging: str, display_name: str) -> str:
    """Vertex writes AIP_* directories under this; it must be on Cloud Storage."""
    if job_dir is None:
        return f"{staging}/vertex-bert-trainer/{display_name}"
    if not job_dir.startswith("gs://") or len(job_dir.rstrip("/")) <= len("gs://"):
        raise UserError(f"--job-dir: Vertex AI writes job outputs to Cloud Storage; expected gs://..., got {job_dir!r}")
    return job_dir.rstrip("/")


# Every trainer flag naming files a job reads, as (config section, field), with the copy command
# its error suggests for a local path: Vertex's machines read Cloud Storage, not this machine.
COPY_FILE = "gcloud storage cp {} gs://BUCKET/data/"
CLOUD_INPUTS = {
    ("data", "training_file"): COPY_FILE,
    ("data", "validation_file"): COPY_FILE,
    ("data", "testing_file"): COPY_FILE,
    ("distillation", "teacher"): "gcloud storage cp -r {} gs://BUCKET/teachers/",
    ("distillation", "teacher_probabilities"): COPY_FILE,
    ("distillation", "unlabeled_file"): COPY_FILE,
}
# Registries Vertex AI pulls custom-container images from without further setup
# (https://cloud.google.com/vertex-ai/docs/training/create-custom-container).
PULLABLE_IMAGE = re.compile(
    r"^([a-z0-9-]+-docker\.pkg\.dev|([a-z]+\.)?gcr\.io)/[^\s:@]+(:[\w.-]+|@sha256:[0-9a-f]{64})?$"
)


def check_trainer_args(trainer_args: Sequence[str], tuned: Sequence[str] = ()) -> config.Config:
    """Parse the pass-through flags with the trainer's own parser, before any money is spent.

    The messages name both spellings of a setting: `trainer.submit --job-dir` and the scripts'
    JOB_DIR, since the scripts pass their arguments through to here.
    """
    if "--job-dir" in space.given_flags(trainer_args):
        raise UserError(
            "--job-dir is not a trainer argument in a cloud job: it is the job's output "
            "directory, which Vertex hands to the trainer. Set JOB_DIR for the scripts "
            "(trainer.submit --job-dir) instead"
        )
    space.check_untuned(trainer_args, tuned, "Vertex", "PARAMETERS (trainer.submit --parameters)")
    trainer_config = config.build_config(list(trainer_args), environ={})
    for (section, field), copy in CLOUD_INPUTS.items():
        spec = getattr(getattr(trainer_config, section), field) or ""
        local = [p.strip() for p in spec.split(",") if p.strip() and not p.strip().startswith("gs://")]
        if local:
            raise UserError(
                f"{config.flag_name(field)} {local[0]}: a cloud job cannot read files on "
                f"this machine; copy it to Cloud Storage ({copy.format(local[0])}) and "
                f"pass the gs:// path"
            )
    return trainer_config


def check_image_uri(image_uri: str) -> None:
    """A warning, not an error: other registries work when the job's service account can pull."""
    if image_uri and not PULLABLE_IMAGE.match(image_uri):
        print(
            f"warning: --image-uri {image_uri!r} (IMAGE_URI for the scripts) is not an Artifact "
            f"Registry (REGION-docker.pkg.dev/PROJECT/REPO/IMAGE:TAG) or gcr.io image; Vertex AI "
            f"may fail to pull it. scripts/build-image.sh prints one.",
            file=sys.stderr,
        )


def run_settings(options: argparse.Namespace) -> dict:
    """What `job.run()` adds to the job spec on submission (the SDK sets these fields itself):
    the service account, the TensorBoard, and the scheduling (trainer.cloud.scheduling)."""
    return {
        "service_account": options.service_account,
        "tensorboard": options.tensorboard,
        **scheduling.run_settings(options.scheduling, options.max_wait),
    }


def submitted_resource(job, options: argparse.Namespace) -> dict:
    """The REST resource a real submission sends: `job.to_dict()` plus the run settings, in the
    fields the SDK's submit() fills (CustomJob.job_spec, HyperparameterTuningJob.trial_job_spec)."""
    resource = job.to_dict()
    spec = resource["jobSpec"] if options.command == "train" else resource["trialJobSpec"]
    settings = run_settings(options)
    for name in ("service_account", "tensorboard"):
        if settings[name]:
            spec["serviceAccount" if name == "service_account" else name] = settings[name]
    if scheduled := scheduling.resource(settings):
        spec["scheduling"] = scheduled
    return resource


def build_arg_parser() -> argparse.ArgumentParser:
    """`train`, `tune` and the deploy commands; the job flags every job command shares."""
    common = argparse.ArgumentParser(add_help=False)
    _add_where_and_what(common)
    _add_machines(common)
    _add_run(common)

    parser = cli.ArgumentParser(
        prog="python -m trainer.submit",
        description="Submit a Vertex AI training or hyperparameter-tuning job for the trainer image. "
        "Arguments after `--` go to `python -m trainer.task` unchanged; the files they "
        "name (data, --teacher, --unlabeled-file, ...) must be on Cloud Storage (gs://).",
        allow_abbrev=False,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("train", parents=[common], allow_abbrev=False, help="One custom training job.")
    tune = commands.add_parser("tune", parents=[common], allow_abbrev=False, help="A hyperparameter tuning job.")
    tune.add_argument("--max-trial-count", type=int, default=12, help="Trials in all (default: 12).")
    tune.add_argument("--parallel-trial-count", type=int, default=3, help="Trials at a time (default: 3).")
    tune.add_argument(
        "--parameters",
        default=",".join(space.TUNED_FLAGS),
        help=f"Comma-separated flags to tune (default: all of {','.join(space.TUNED_FLAGS)}).",
    )
    deployment.add_parsers(commands)
    return parser


def _add_where_and_what(common) -> None:
    """The project, region and bucket a job goes to, and the image it runs."""
    where = common.add_argument_group("where")
    where.add_argument("--project", required=True, help="Google Cloud project id.")
    where.add_argument("--region", required=True, help="Vertex AI region, e.g. us-central1.")
    where.add_argument(
        "--bucket",
        "--staging-bucket",
        dest="bucket",
        required=True,
        help="Cloud Storage bucket (name or gs://BUCKET[/PREFIX]) for staging and, by default, the job's outputs.",
    )
    where.add_argument(
        "--job-dir", help="Base output directory, gs://... (default: gs://BUCKET/vertex-bert-trainer/DISPLAY_NAME)."
    )
    what = common.add_argument_group("what")
    what.add_argument(
        "--image-uri", required=True, help="Trainer image, e.g. REGION-docker.pkg.dev/PROJECT/REPO/IMAGE:TAG."
    )
    what.add_argument("--display-name", help="Job name in the console (default: vbt-COMMAND-TIMESTAMP).")


def _add_machines(common) -> None:
    """The machines a job runs on: CPU, GPUs, workers or a TPU."""
    machines = common.add_argument_group("machines")
    machines.add_argument("--machine-type", help=f"Compute Engine machine type (default: {DEFAULT_MACHINE_TYPE}).")
    machines.add_argument("--accelerator-type", help=f"GPU type, e.g. {DEFAULT_GPU}, NVIDIA_L4, NVIDIA_TESLA_A100.")
    machines.add_argument(
        "--accelerator-count", type=int, default=0, help="GPUs per machine (default: 1 with a GPU type)."
    )
    machines.add_argument(
        "--replica-count",
        type=int,
        default=0,
        help="Machines beyond the chief, for MultiWorkerMirroredStrategy (default: 0).",
    )
    machines.add_argument(
        "--tpu",
        choices=list(TPU_ACCELERATORS),
        help="Run on a TPU VM of this version; needs the TPU image. v2, v3: cloud-tpu, 8 "
        "cores; v5e: ct5lp-hightpu-Nt with --tpu-chips N.",
    )
    machines.add_argument(
        "--tpu-chips", type=int, help=f"TPU v5e chips: {', '.join(map(str, V5E_CHIPS))} (default: {DEFAULT_V5E_CHIPS})."
    )


def _add_run(common) -> None:
    """How a job runs: its identity, TensorBoard, scheduling, and --dry-run."""
    run = common.add_argument_group("run")
    run.add_argument("--service-account", help="Service account the job runs as (required with --tensorboard).")
    run.add_argument(
        "--tensorboard",
        help="Vertex AI TensorBoard instance to stream AIP_TENSORBOARD_LOG_DIR to: "
        "projects/P/locations/R/tensorboards/ID.",
    )
    run.add_argument(
        "--scheduling",
        choices=list(scheduling.STRATEGIES),
        default="standard",
        help="How Vertex finds the machines: standard (on demand), spot (Spot VMs: cheaper, "
        "may be preempted; the trainer resumes from its last epoch), or flex-start "
        "(Dynamic Workload Scheduler: queues until L4/A100/H100/H200/B200 GPUs are "
        "free, up to --max-wait). Default: standard.",
    )
    run.add_argument(
        "--max-wait",
        help="flex-start only: how long the job may queue for its machines, "
        "e.g. 30m, 2h, 1h30m, 1d or seconds (0: no limit; Vertex's "
        "default: 1 day).",
    )
    run.add_argument(
        "--dry-run", action="store_true", help="Print the job as JSON and submit nothing (needs no credentials)."
    )


def parse_args(argv: Sequence[str]) -> tuple:
    """(options, trainer args): everything after the first `--` belongs to the trainer."""
    argv = list(argv)
    split = argv.index("--") if "--" in argv else len(argv)
    return build_arg_parser().parse_args(argv[:split]), argv[split + 1 :]


def build_job(
    options: argparse.Namespace, trainer_args: Sequence[str], credentials=None, now: datetime.datetime | None = None
):
    """The SDK job object for `options`; `credentials=None` means Application Default Credentials."""
    from google.cloud import aiplatform
    from google.cloud.aiplatform import utils

    try:
        utils.validate_region(options.region)
    except ValueError:
        raise UserError(
            f"--region: {options.region!r} is not a Vertex AI region (e.g. us-central1, europe-west4)"
        ) from None
    tuned = space.chosen(options.parameters) if options.command == "tune" else ()
    trainer_config = check_trainer_args(trainer_args, tuned)
    check_image_uri(options.image_uri)
    if options.tensorboard and not options.service_account:
        raise UserError("--tensorboard needs --service-account: Vertex uploads TensorBoard logs as that account")
    run_settings(options)  # --scheduling and --max-wait, checked before the job is built
    scheduling.check_machines(options.scheduling, options.tpu, options.accelerator_type)
    staging = staging_uri(options.bucket)
    display_name = options.display_name or default_display_name(options.command, now or datetime.datetime.now())
    pools = worker_pool_specs(
        options.image_uri,
        trainer_args,
        machine_type=options.machine_type,
        accelerator_type=options.accelerator_type,
        accelerator_count=options.accelerator_count,
        replica_count=options.replica_count,
        tpu=options.tpu,
        tpu_chips=options.tpu_chips,
    )
    where = {"project": options.project, "location": options.region, "credentials": credentials}
    labels = {"app": "vertex-bert-trainer", "command": options.command}
    custom_job = aiplatform.CustomJob(
        display_name=display_name,
        worker_pool_specs=pools,
        staging_bucket=staging,
        labels=labels,
        base_output_dir=base_output_dir(options.job_dir, staging, display_name),
        **where,
    )
    if options.command == "train":
        return custom_job
    if not 1 <= options.parallel_trial_count <= options.max_trial_count:
        raise UserError(
            f"--parallel-trial-count: must be in [1, --max-trial-count={options.max_trial_count}], "
            f"got {options.parallel_trial_count}"
        )
    specs = tuning_parameters()
    return aiplatform.HyperparameterTuningJob(
        display_name=display_name,
        custom_job=custom_job,
        metric_spec=metric_spec(trainer_config.train.selection_metric),
        parameter_spec={name: specs[name] for name in tuned},
        max_trial_count=options.max_trial_count,
        parallel_trial_count=options.parallel_trial_count,
        # The exported model is the best epoch's, so the trial's value is its best measurement.
        measurement_selection="best",
        labels=labels,
        **where,
    )


def main(argv: Sequence[str]) -> int:
    options, trainer_args = parse_args(argv)
    if options.command in deployment.COMMANDS:
        return deployment.main(options, trainer_args)
    # Google's client libraries take seconds to import: only now, so --help and flag errors
    # answer at once.
    with api.google_errors():
        job = build_job(options, trainer_args, credentials=api.credentials(options.dry_run))
        if options.dry_run:
            print(
                f"Dry run: {type(job).__name__} for projects/{options.project}/locations/{options.region}, "
                f"not submitted.",
                file=sys.stderr,
            )
            print(json.dumps(submitted_resource(job, options), indent=2))
            return 0
        try:
            # run() creates the job, prints its console link and follows it until it ends.
            job.run(**run_settings(options))
        except RuntimeError as e:  # the SDK's "Job failed with: ..." when the job itself fails
            raise api.CloudError(str(e)) from None
    return 0
