"""--scheduling and --max-wait: how Vertex AI finds a job's machines (CustomJobSpec.scheduling).

* standard: on-demand machines, Vertex's default (an unset strategy means STANDARD), so the job
  spec carries no scheduling at all.
* spot: Spot VMs, billed for the time they run and not while queued or preempted, which
  Compute Engine may take back at any time; not offered on TPU Pods, which no job here asks
  for (https://cloud.google.com/vertex-ai/docs/training/use-spot-vms).
* flex-start: Dynamic Workload Scheduler queues the job until all of its machines can start at
  once, for at most --max-wait (Vertex's default: one day; 0: no limit). Vertex offers it for
  jobs on L4, A100, H100, H200 or B200 GPUs whose pools share one machine configuration (this
  trainer's always do), CustomJob and HyperparameterTuningJob alike
  (https://cloud.google.com/vertex-ai/docs/training/schedule-jobs-dws).

A Spot or flex-start job also sets restart_job_on_worker_restart: Vertex restarts a replica it
lost with the same arguments and CLOUD_ML_JOB_ID, and the trainer resumes from its last epoch
checkpoint (trainer.training.jobdir); restarting the whole job brings every replica of a
MultiWorkerMirroredStrategy job back together, whose collectives cannot lose and regain one
peer mid-step (https://cloud.google.com/vertex-ai/docs/training/understanding-training-service).

The settings are `job.run()`'s keyword arguments (google.cloud.aiplatform.jobs), which build
the Scheduling message on submission; `resource` renders the same message for a dry run.
"""

import re
import sys

from trainer.errors import UserError

STRATEGIES = {"standard": "STANDARD", "spot": "SPOT", "flex-start": "FLEX_START"}
# The GPUs the Dynamic Workload Scheduler page lists for custom training (schedule-jobs-dws).
FLEX_START_GPUS = (
    "NVIDIA_L4",
    "NVIDIA_TESLA_A100",
    "NVIDIA_A100_80GB",
    "NVIDIA_H100_80GB",
    "NVIDIA_H100_MEGA_80GB",
    "NVIDIA_H200_141GB",
    "NVIDIA_B200",
)
DURATION_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
DURATION = re.compile(r"(?:\d+[dhms])+|\d+")
MAX_WAIT = "--max-wait (MAX_WAIT for the scripts)"


def parse_duration(text: str) -> int:
    """Seconds in `text`: whole seconds (`3600`) or numbers with units d, h, m, s, largest
    first or in any order (`30m`, `2h`, `1h30m`, `1d`); Vertex takes whole seconds."""
    value = text.strip().lower()
    if not DURATION.fullmatch(value):
        raise UserError(
            f"{MAX_WAIT}: expected a duration such as 30m, 2h, 1h30m, 1d or seconds "
            f"(3600; 0 waits without a limit), got {text!r}"
        )
    if value.isdigit():
        return int(value)
    return sum(int(n) * DURATION_UNITS[unit] for n, unit in re.findall(r"(\d+)([dhms])", value))


def run_settings(strategy: str, max_wait: str | None) -> dict:
    """`job.run()`'s scheduling arguments for `--scheduling strategy --max-wait max_wait`."""
    if max_wait is not None and strategy != "flex-start":
        raise UserError(
            f"{MAX_WAIT} is how long a flex-start job may queue for its machines; "
            f"it needs --scheduling flex-start (SCHEDULING=flex-start), not {strategy}"
        )
    if strategy == "standard":
        return {}
    from google.cloud.aiplatform_v1.types import Scheduling

    settings = {"scheduling_strategy": Scheduling.Strategy[STRATEGIES[strategy]], "restart_job_on_worker_restart": True}
    if max_wait is not None:
        settings["max_wait_duration"] = parse_duration(max_wait)
    return settings


def check_machines(strategy: str, tpu: str | None, accelerator_type: str | None) -> None:
    """Flex-start on a CPU-only job, which the scheduler has nothing to queue for, fails here
    rather than in the queue.

    A TPU or a GPU the page does not list yet gets a warning, not an error: the list has grown
    before (A100 and H100 first; Google Cloud offers flex-start TPUs outside Vertex AI), and
    Vertex itself has the last word."""
    if strategy != "flex-start":
        return
    if not tpu and not accelerator_type:
        raise UserError(
            f"--scheduling flex-start (SCHEDULING for the scripts): Vertex AI's Dynamic "
            f"Workload Scheduler queues jobs on {', '.join(FLEX_START_GPUS)} GPUs, not "
            f"a CPU-only job; use --scheduling spot or standard"
        )
    machines = f"TPU {tpu}" if tpu else accelerator_type
    if tpu or accelerator_type not in FLEX_START_GPUS:
        print(
            f"warning: --scheduling flex-start with {machines}: Vertex AI documents flex-start "
            f"for {', '.join(FLEX_START_GPUS)} GPUs only and may refuse the job",
            file=sys.stderr,
        )


def resource(settings: dict) -> dict | None:
    """The Scheduling message `job.run(**settings)` sends, as REST JSON (None: none is sent);
    `settings` may hold run()'s other arguments too."""
    if "scheduling_strategy" not in settings:
        return None
    from google.cloud.aiplatform_v1.types import Scheduling
    from google.protobuf import duration_pb2, json_format

    wait = settings.get("max_wait_duration")
    message = Scheduling(
        strategy=settings["scheduling_strategy"],
        restart_job_on_worker_restart=settings["restart_job_on_worker_restart"],
        max_wait_duration=None if wait is None else duration_pb2.Duration(seconds=wait),
    )
    return json_format.MessageToDict(Scheduling.pb(message))
