"""Benchmark: steady-state training steps of `python -m trainer.task`, and where their time goes.

    python bench/steps.py                          # defaults: 3 rounds of 30 steps, ex/s and CPU
    python bench/steps.py --profile                # also: op time by category, one traced round
    python bench/steps.py -- --mixed-precision off # trainer flags after `--`

The model, optimizer, dtype policy and batches are built by the trainer's own stages
(trainer.training.stages: resolve_runtime ... build_model), so the step timed here is the step
a run trains with; nothing is written outside a temporary job directory. Rounds of `--steps`
steps each follow one untimed warm-up round (tracing); the median round is reported. Compare
two code versions by alternating runs (A, B, A, B) with PYTHONPATH pointing at each checkout:
the machine's other load moves every figure, a ratio within one pair is what counts.

Data: the first --rows lines of TweetEval's test split (../shared/data, see bench/run.py), else
the sample posts shipped in the package.
"""

import argparse
import collections
import glob
import os
import re
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run as bench_run  # noqa: E402  (bench/run.py: the same TweetEval preparation)
from common import add_publish_flag, finish, printed, publish, timed  # noqa: E402

# Op events are named "scope/op_name:OpType"; the first matching pattern names the category.
CATEGORIES = (
    ("matmul/einsum", r":(_Mkl|_MklNative)?(Fused)?(Batch)?(MatMul|Einsum)(V\d)?$"),
    ("optimizer update", r"^(AdamW|Adam|SGD|LossScaleOptimizer)/|ResourceApply"),
    ("dropout RNG", r"[Dd]ropout"),
    ("gelu", r"[Gg]elu"),
    ("layer norm", r"layer_norm|LayerNorm"),
    ("softmax", r"[Ss]oftmax"),
    ("casts", r":Cast$"),
    ("embeddings", r"embedding"),
    ("loss", r"SparseSoftmaxCrossEntropy|(^|/)loss/"),
)
OP_EVENT = re.compile(r"^[^:]+:[A-Za-z_0-9]+$")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=2000, help="training rows (TweetEval)")
    parser.add_argument("--steps", type=int, default=30, help="steps per timed round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--profile", action="store_true", help="trace one more round with the TF profiler and group op time"
    )
    parser.add_argument(
        "--predict",
        action="store_true",
        help="also time inference (the model's forward, training=False) on --steps of the same batches",
    )
    parser.add_argument("--json", help="also write the results here")
    add_publish_flag(parser)
    parser.add_argument("trainer_flags", nargs="*", help="flags of trainer.task (after --)")
    return parser.parse_args(argv)


def build(work: str, rows: int, flags) -> tuple:
    """RunContext after build_model, and the training data of many epochs."""
    from trainer import config as config_lib
    from trainer.data import input_pipeline
    from trainer.training import jobdir, stages
    from trainer.training.context import RunContext

    data = bench_run.prepare_data(work)
    train = bench_run.head_csv(data["train"], rows, os.path.join(work, "train.csv"))
    argv = [
        "--training-file",
        train,
        "--validation-file",
        data["eval"],
        "--text-column",
        data["text_column"],
        "--label-column",
        data["label_column"],
        "--job-dir",
        os.path.join(work, "job"),
        "--epochs",
        "100",
        *flags,
    ]
    if data["label_column"] == "label":
        argv += ["--label-type", "index", "--label-names", bench_run.LABELS]
    config = config_lib.build_config(argv, os.environ)
    ctx = RunContext(config, dict(os.environ), jobdir.JobPaths.from_config(config), True)
    for stage in (
        stages.check_inputs,
        stages.prepare_job_dir,
        stages.load_data,
        stages.resolve_runtime,
        stages.load_encoder,
        stages.tokenize,
        stages.build_model,
    ):
        stage(ctx)
    train_data = input_pipeline.training_dataset(
        ctx.inputs.tokenized["train"], ctx.inputs.train_batching, seed=config.train.seed, first_epoch=0, epochs=100
    )
    return ctx, train_data


def timed_round(model, iterator, steps: int, batch_size: int) -> tuple:
    """(examples per second, CPU milliseconds per example) over `steps` steady steps.

    The round's first call of the training function (steps_per_execution steps) is not
    timed. CPU time counts every thread of this process: on a shared machine it moves much less
    than wall time, and it is what removing work from a step should lower.
    """
    from trainer.training.callbacks import TrainingClock

    class CpuClock(TrainingClock):
        def on_train_batch_end(self, batch, logs=None):
            if self.first_step_seconds is None:
                self.cpu_start = time.process_time()
            super().on_train_batch_end(batch, logs)
            self.cpu_end = time.process_time()

    clock = CpuClock()
    per_call = model._steps_per_execution.numpy().item()
    model.fit(iterator, epochs=1, steps_per_epoch=steps + per_call, callbacks=[clock], verbose=0)
    examples = clock.steady_steps * batch_size
    return examples / clock.steady_seconds, 1000 * (clock.cpu_end - clock.cpu_start) / examples


def predict_rate(tf, model, iterator, steps: int, rounds: int) -> float:
    """Examples per second of the model's forward in inference (training=False: no dropout, no
    gradients, one graph for every bucket's shape) over `steps` training batches, the median of
    `rounds` passes after one untimed pass (tracing)."""
    forward = tf.function(lambda features: model(features, training=False), reduce_retracing=True)
    batches = [next(iterator)[0] for _ in range(steps)]
    examples = sum(int(features["input_word_ids"].shape[0]) for features in batches)
    return examples / timed(lambda: [forward(f).numpy() for f in batches], rounds)


def op_categories(logdir: str) -> dict:
    """Seconds per category of TF op events in the profiler's host trace."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    path = sorted(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True))[-1]
    with open(path, "rb") as f:
        space.ParseFromString(f.read())
    totals, by_type = collections.Counter(), collections.Counter()
    host = next(plane for plane in space.planes if plane.name == "/host:CPU")
    for line in host.lines:
        if not line.name.startswith("tf_Compute"):  # the executor's inter-op threads
            continue
        for event in line.events:
            name = host.event_metadata[event.metadata_id].name
            if OP_EVENT.match(name):
                totals[categorize(name)] += event.duration_ps / 1e12
                by_type[name.rsplit(":", 1)[1]] += event.duration_ps / 1e12
    return {"categories": dict(totals.most_common()), "op_types": dict(by_type.most_common(25))}


def print_profile(profile: dict, title: str) -> None:
    """op_categories' result as a table: seconds and share per category and op type."""
    ops = sum(profile["categories"].values())
    print(f"{title}, {ops:.2f}s of op time (summed over threads)")
    for name, seconds in profile["categories"].items():
        print(f"  {name:18s} {seconds:7.2f}s  {100 * seconds / ops:5.1f}%")
    print("top op types:")
    for name, seconds in profile["op_types"].items():
        print(f"  {name:28s} {seconds:7.2f}s  {100 * seconds / ops:5.1f}%")


def categorize(name: str) -> str:
    for category, pattern in CATEGORIES:
        if re.search(pattern, name):
            return category
    return "other"


def main(argv=None) -> dict:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    import trainer

    tf = trainer.import_tensorflow()

    work = tempfile.mkdtemp(prefix="bench-steps-")
    ctx, train_data = build(work, args.rows, args.trainer_flags)
    iterator = iter(train_data)
    ctx.trainable.model.fit(iterator, epochs=1, steps_per_epoch=2, verbose=0)  # traces the step
    with printed() as text:
        result = {
            "flags": args.trainer_flags,
            "rows": args.rows,
            "steps": args.steps,
            "device": {k: v for k, v in ctx.runtime.plan.__dict__.items() if k != "reasons"},
            "mean_tokens": float(ctx.inputs.tokenized["train"].lengths.mean()),
            **measure(tf, ctx.trainable.model, iterator, ctx.config.train.batch_size, args, work),
        }
    if args.publish:
        publish("steps", result, text.getvalue())
    return finish(result, args.json, work)


def measure(tf, model, iterator, batch: int, args, work: str) -> dict:
    """Timed rounds of steady steps, then (--profile) one traced round, printed as they finish."""
    rounds = [timed_round(model, iterator, args.steps, batch) for _ in range(args.rounds)]
    rates, cpu = [r[0] for r in rounds], [r[1] for r in rounds]
    result = {
        "examples_per_second": rates,
        "median": statistics.median(rates),
        "cpu_ms_per_example": cpu,
        "median_cpu_ms_per_example": statistics.median(cpu),
    }
    print(
        f"ex/s per round: {', '.join(f'{r:.1f}' for r in rates)}; median "
        f"{result['median']:.1f}; CPU ms/example: {', '.join(f'{c:.1f}' for c in cpu)}; "
        f"median {result['median_cpu_ms_per_example']:.1f}",
        flush=True,
    )
    if args.predict:
        result["predict_examples_per_second"] = predict_rate(tf, model, iterator, args.steps, args.rounds)
        print(f"prediction ex/s: {result['predict_examples_per_second']:.1f}", flush=True)
    if args.profile:
        logdir = os.path.join(work, "profile")
        tf.profiler.experimental.start(logdir)
        start = time.perf_counter()
        timed_round(model, iterator, args.steps, batch)
        wall = time.perf_counter() - start
        tf.profiler.experimental.stop()
        result["profile"] = {"wall_seconds": wall, **op_categories(logdir)}
        print_profile(result["profile"], f"profiled one more round: {wall:.2f}s wall")
    return result


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    # Skip interpreter teardown: the iterator over 100 epochs of batches keeps TensorFlow's
    # input threads busy for minutes while the process exits.
    os._exit(0)
