"""Benchmark: where `python -m trainer.predict` spends its time, and what its batching buys.

    python bench/predict_parts.py --model-dir runs/quickstart/model            # TweetEval val
    python bench/predict_parts.py --model-dir runs/quickstart/model --profile  # op time too

In one process, on an exported model and the TweetEval validation file (the file bench/run.py's
prediction ratio is measured on; the sample posts when TweetEval is absent), it times the
parts of trainer.predict's path separately: reading the file, tokenizing with the export's own
`tokenize`, and the model on token-sorted batches padded to the ladder (what trainer.predict
does) at several batch sizes, next to the same model on batches padded to 128 in file order
(what a tutorial loop does). Each figure is the median of --rounds rounds after one untimed
round. With --profile the TF profiler traces one more round of the default batching and
sums op time by category, as bench/steps.py does for training steps.
"""

import argparse
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run as bench_run  # noqa: E402  (bench/run.py: the same TweetEval preparation)
import steps as bench_steps  # noqa: E402  (op time by category)
from common import add_publish_flag, finish, printed, publish, timed  # noqa: E402


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model-dir", required=True, help="an exported model (JOB_DIR/model)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--batch-sizes", default="32,128,512", help="token-sorted batch sizes to time (trainer.predict's default: 128)"
    )
    parser.add_argument(
        "--profile", action="store_true", help="trace one more round of batch 128 and group op time by category"
    )
    parser.add_argument("--json", help="also write the results here")
    add_publish_flag(parser)
    return parser.parse_args(argv)


def read_texts(path: str, column: str) -> list:
    from trainer import reading

    texts = []
    for frame in reading.file_frames(path, "--input", 8192):
        texts += [str(t) for t in frame[column].tolist()]
    return texts


def file_order_batches(features: dict, batch_size: int, width: int):
    """Batches in file order, every one padded to `width` tokens (a tutorial's evaluation loop)."""
    rows = len(features["input_word_ids"])
    for start in range(0, rows, batch_size):
        yield {k: v[start : start + batch_size, :width] for k, v in features.items()}


def parts(model, texts: list, features: dict, args) -> dict:
    """Median seconds of each part; `features`: the texts tokenized once beforehand."""
    from trainer.inference import loaded_model

    width = features["input_word_ids"].shape[1]
    seconds = {"tokenize": timed(lambda: loaded_model.tokenize(model, texts), args.rounds)}
    for size in [int(s) for s in args.batch_sizes.split(",")]:
        seconds[f"model, token-sorted ladder batches of {size}"] = timed(
            lambda size=size: [model.predict_tokens(b) for _, b in loaded_model.token_batches(features, size)],
            args.rounds,
        )
    seconds[f"model, file-order batches of 32 padded to {width}"] = timed(
        lambda: [model.predict_tokens(b) for b in file_order_batches(features, 32, width)], args.rounds
    )
    return seconds


def profile(model, features: dict, work: str) -> dict:
    import tensorflow as tf

    from trainer.inference import loaded_model

    logdir = os.path.join(work, "profile")
    tf.profiler.experimental.start(logdir)
    for _, batch in loaded_model.token_batches(features, 128):
        model.predict_tokens(batch)
    tf.profiler.experimental.stop()
    return bench_steps.op_categories(logdir)


def report(result: dict) -> None:
    rows = result["rows"]
    print(
        f"{rows} texts ({result['data']}), mean {result['mean_tokens']:.1f} tokens; "
        f"median of {result['rounds']} rounds:"
    )
    print(f"  {'part':55s} {'seconds':>8s} {'texts/s':>9s}")
    for name, seconds in result["seconds"].items():
        print(f"  {name:55s} {seconds:8.2f} {rows / seconds:9.1f}")
    if "profile" in result:
        bench_steps.print_profile(result["profile"], "one pass at batch 128")


def main(argv=None) -> dict:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    import trainer

    trainer.import_tensorflow()
    from trainer.inference import loaded_model
    from trainer.serving import export

    work = tempfile.mkdtemp(prefix="bench-predict-")
    data = bench_run.prepare_data(work)
    texts = read_texts(data["eval"], data["text_column"])
    read_seconds = timed(lambda: read_texts(data["eval"], data["text_column"]), args.rounds)
    model = export.load_module(args.model_dir)
    loaded_model.warm_up(model)
    features = loaded_model.tokenize(model, texts)
    result = {
        "model_dir": args.model_dir,
        "data": data["name"],
        "rows": len(texts),
        "rounds": args.rounds,
        "mean_tokens": float(features["input_mask"].sum(axis=1).mean()),
        "seconds": {"read the file (trainer.data.reading)": read_seconds, **parts(model, texts, features, args)},
    }
    if args.profile:
        result["profile"] = profile(model, features, work)
    with printed() as text:
        report(result)
    if args.publish:
        publish("predict_parts", result, text.getvalue())
    return finish(result, args.json, work)


if __name__ == "__main__":
    main()
