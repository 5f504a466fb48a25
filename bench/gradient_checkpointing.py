"""Peak memory of a training step with and without --gradient-checkpointing.

Each setting runs in its own process (a fresh allocator), which builds a RoBERTa-large-shaped
native encoder with random weights (24 layers, hidden 1024, 16 heads, intermediate 4096, vocab
50265), takes --steps AdamW steps on random ids at --batch-size x --length under --precision,
and reports its peak resident memory (VmHWM), its memory once built and the loss. The CPU is
shared: the load average before and after is part of the result.

    python bench/gradient_checkpointing.py [--layers 24 --batch-size 8 --length 512] [--publish]
"""

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import add_publish_flag, finish, printed, publish, table  # noqa: E402

ROBERTA_LARGE = dict(
    vocab_size=50265,
    hidden_size=1024,
    num_heads=16,
    intermediate_size=4096,
    max_position_embeddings=514,
    type_vocab_size=1,
    layer_norm_eps=1e-5,
    position_padding_id=1,
    family="roberta",
)


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--length", type=int, default=512)
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--precision", default="mixed_bfloat16", choices=("float32", "mixed_bfloat16"))
    parser.add_argument("--json", help="also write the result here")
    parser.add_argument("--child", choices=("off", "on"), help=argparse.SUPPRESS)
    add_publish_flag(parser)
    return parser.parse_args(argv)


def _resident(field: str) -> int:
    """A /proc/self/status memory figure in bytes (VmRSS now, VmHWM the peak)."""
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith(field + ":"))
    return int(line.split()[1]) * 1024


def child(args) -> dict:
    """One setting: build, train --steps steps, report memory and loss as one JSON line."""
    import numpy as np
    import tensorflow as tf
    import tf_keras

    from trainer.modeling.encoders import layers
    from trainer.modeling.encoders.models import bert

    tf_keras.mixed_precision.set_global_policy(args.precision)
    tf_keras.backend.experimental.enable_tf_random_generator()  # as the trainer does
    tf_keras.utils.set_random_seed(0)
    network = bert.build(layers.EncoderConfig(num_layers=args.layers, **ROBERTA_LARGE))
    if args.child == "on":
        layers.recompute_blocks(network)
    optimizer = tf_keras.optimizers.AdamW(1e-5)
    optimizer.build(network.trainable_variables)
    ids = np.random.RandomState(0).randint(3, 50265, (args.batch_size, args.length)).astype(np.int32)
    features = dict(input_word_ids=ids, input_mask=np.ones_like(ids), input_type_ids=0 * ids)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            pooled = tf.cast(network(features, training=True)["pooled_output"], tf.float32)
            loss = tf.reduce_mean(tf.square(pooled - 0.5))
        variables = network.trainable_variables
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    built = _resident("VmRSS")
    start, losses = time.perf_counter(), [float(step()) for _ in range(args.steps)]
    return {
        "recompute": args.child == "on",
        "built_bytes": built,
        "peak_bytes": _resident("VmHWM"),
        "losses": losses,
        "seconds": time.perf_counter() - start,
    }


def run_setting(args, setting: str) -> dict:
    argv = [
        sys.executable,
        os.path.abspath(__file__),
        "--child",
        setting,
        "--layers",
        str(args.layers),
        "--batch-size",
        str(args.batch_size),
        "--length",
        str(args.length),
        "--steps",
        str(args.steps),
        "--precision",
        args.precision,
    ]
    env = {
        **os.environ,
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    }
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    if done.returncode:
        return {"recompute": setting == "on", "failed": done.returncode, "stderr": done.stderr[-2000:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> dict:
    args = parse(argv)
    if args.child:
        print(json.dumps(child(args)))
        return {}
    load_before = os.getloadavg()
    runs = [run_setting(args, setting) for setting in ("off", "on")]
    result = {
        "shape": {**ROBERTA_LARGE, "num_layers": args.layers},
        "batch_size": args.batch_size,
        "length": args.length,
        "steps": args.steps,
        "precision": args.precision,
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "runs": runs,
    }
    gib = 2.0**30
    rows = [
        [
            "on" if run["recompute"] else "off",
            f"{run['built_bytes'] / gib:.2f}" if "peak_bytes" in run else "-",
            f"{run['peak_bytes'] / gib:.2f}" if "peak_bytes" in run else "failed",
            f"{(run['peak_bytes'] - run['built_bytes']) / gib:.2f}" if "peak_bytes" in run else "-",
            f"{run['losses'][-1]:.6f}" if "losses" in run else "-",
            f"{run['seconds']:.0f}" if "seconds" in run else "-",
        ]
        for run in runs
    ]
    with printed() as text:
        print(
            f"RoBERTa-large shape, {args.layers} layers, batch {args.batch_size} x {args.length}, "
            f"{args.precision}, {args.steps} AdamW step(s); load average "
            f"{load_before[0]:.1f} before, {result['load_average_after'][0]:.1f} after"
        )
        print(table(rows, ["checkpointing", "built GiB", "peak GiB", "peak - built GiB", "loss", "seconds"]))
    if args.publish:
        publish("gradient_checkpointing", result, text.getvalue())
    return finish(result, args.json)


if __name__ == "__main__":
    main()
