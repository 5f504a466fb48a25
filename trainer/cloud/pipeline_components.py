"""The KFP v2 pipeline: train -> evaluate -> gate -> register -> deploy (needs the `pipeline` extra).

Every step is a lightweight Python component, the one kind both places run: Vertex AI Pipelines
runs it in `base_image` (the trainer image, which has this package), and kfp.local's
SubprocessRunner runs only lightweight Python components, in this interpreter (kfp/local/
subprocess_task_handler.py refuses container components). Each body only imports
trainer/cloud/pipeline_steps.py and calls one function there: KFP ships a component's source, so
the work itself lives in the package.

Training on Vertex is a custom job that the train step submits and follows (`trainer.submit
train`), with the machines, accelerators and scheduling that command takes; locally it is
`trainer.task` on this machine. Register and deploy are one step, `trainer.deploy` (see
trainer/cloud/pipeline_deploy.py), under `dsl.If` on the gate's verdict.
"""

import dataclasses

from kfp import dsl

PIPELINE_NAME = "vertex-bert-trainer"
# What kfp.local's SubprocessRunner is told the image is: it runs this interpreter anyway, and
# warns (RuntimeWarning) about an image without "python" in its name.
LOCAL_IMAGE = "python:3.11"


@dataclasses.dataclass(frozen=True)
class Plan:
    """Everything the pipeline bakes in at compile time; job_dir and gate stay run parameters."""

    job_dir: str
    gate: str
    trainer_args: list[str]
    submit_args: list[str]  # empty: train on this machine (run --local)
    deploy_args: list[str]  # trainer.deploy's (trainer/cloud/pipeline_deploy.py)
    base_image: str = LOCAL_IMAGE
    # Vertex: the trainer image need not carry kfp; each step pip-installs this kfp first
    # (`kfp==VERSION --no-deps`, from PyPI). Locally kfp is already here.
    install_kfp: bool = False


def train(job_dir: str, submit_args: list, trainer_args: list) -> str:
    """Trains into job_dir: a Vertex AI custom job, or trainer.task on this machine."""
    from trainer.cloud import pipeline_steps

    return pipeline_steps.train(job_dir, submit_args, trainer_args)


def evaluate(job_dir: str, expression: str) -> float:
    """The gated metric from JOB_DIR/metrics.json."""
    from trainer.cloud import pipeline_steps

    return pipeline_steps.metric_value(job_dir, expression)


def gate(value: float, expression: str) -> bool:
    """Whether the model may be registered and deployed."""
    from trainer.cloud import pipeline_steps

    return pipeline_steps.passes(value, expression)


def register_and_deploy(job_dir: str, args: list):
    """Uploads JOB_DIR/model as a version of the parent model and deploys it (trainer.deploy)."""
    from trainer.cloud import pipeline_steps

    pipeline_steps.register_and_deploy(job_dir, args)


def build(plan: Plan):
    """The pipeline function for `plan`, ready for kfp.compiler or a kfp.local run."""

    def component(function):
        return dsl.component(function, base_image=plan.base_image, install_kfp_package=plan.install_kfp)

    train_op, evaluate_op, gate_op, deploy_op = map(component, (train, evaluate, gate, register_and_deploy))

    @dsl.pipeline(
        name=PIPELINE_NAME,
        description="Fine-tune, gate on a metric of metrics.json, register a model version, deploy it.",
    )
    def loop(job_dir: str = plan.job_dir, gate: str = plan.gate) -> float:
        trained = train_op(job_dir=job_dir, submit_args=plan.submit_args, trainer_args=plan.trainer_args)
        # Every run trains and deploys anew: Vertex would otherwise reuse a cached step's outputs.
        trained.set_caching_options(False)
        measured = evaluate_op(job_dir=trained.output, expression=gate)
        verdict = gate_op(value=measured.output, expression=gate)
        # A single, unnamed output: kfp.local (2.17) resolves a dsl.If condition on another
        # task's output only when that output is `Output` (enhanced_dag_orchestrator.py,
        # ConditionEvaluator._resolve_pipeline_channel); a named one makes the branch never run.
        with dsl.If(verdict.output == True, name="gate-passed"):  # noqa: E712 (a KFP expression)
            deploy_op(job_dir=trained.output, args=plan.deploy_args).set_caching_options(False)
        return measured.output

    return loop


def compile_to(plan: Plan, path: str) -> None:
    """Writes the pipeline spec (YAML) that Vertex AI Pipelines runs."""
    from kfp import compiler

    compiler.Compiler().compile(build(plan), package_path=path)
