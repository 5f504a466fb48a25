"""`python -m trainer.tune`: a local hyperparameter search over the space `trainer.submit tune`
sends to Vertex, one trainer process per trial, resumable, with trials.csv and the best command.

Most tests replace the trainer process by a stand-in (FakeTrainer, in place of trials.run): the
search's bookkeeping is what they check. A module fixture runs real searches on the tiny encoder:
killed, resumed, continued and rerun finished (slow tier, which CI runs on TensorFlow 2.21)."""

import json
import os
import shlex
import signal
import subprocess
import sys
import time

import pytest
from conftest import TINY_TASK_FLAGS, read_csv
from google.cloud.aiplatform import hyperparameter_tuning as hpt
from test_task import trainer_logger_restored

from trainer import cli, config, tune
from trainer.cloud import submission
from trainer.tuning import finish, search, space, summary, trials

# --- one space for both searches -----------------------------------------------------------------


def vertex_dimension(spec):
    """A Vertex parameter spec as (low, high, log) or values."""
    if isinstance(spec, hpt.CategoricalParameterSpec):
        return tuple(spec.values)
    return (spec.min, spec.max, spec.scale == "log")


def optuna_dimension(distribution):
    if hasattr(distribution, "choices"):
        return tuple(distribution.choices)
    return (distribution.low, distribution.high, distribution.log)


def test_the_local_search_and_vertex_search_the_same_space():
    vertex = {name: vertex_dimension(spec) for name, spec in submission.tuning_parameters().items()}
    local = {name: optuna_dimension(d) for name, d in search.distributions(space.TUNED_FLAGS).items()}
    assert local == vertex
    assert list(local) == list(space.SPACE) == list(space.TUNED_FLAGS)


def test_parameters_are_a_subset_taken_in_the_order_given():
    assert list(search.distributions(space.chosen("dropout, --learning-rate"))) == ["dropout", "learning-rate"]


# --- the search, with a stand-in for the trainer -------------------------------------------------


class FakeTrainer:
    """Stands in for trials.run: makes the trial's job dir and records its command; the metric
    is the trial's --dropout, or what `outcome(trial number, flags)` says."""

    def __init__(self, outcome=None):
        self.runs = []
        self.outcome = outcome or (lambda trial, flags: trials.Outcome(float(flags["dropout"]), "", 2.0))

    def __call__(self, command, job_dir, metric):
        os.makedirs(job_dir, exist_ok=True)
        flags = dict(arg[2:].split("=", 1) for arg in command if arg.startswith("--") and "=" in arg)
        self.runs.append({"command": list(command), "job_dir": job_dir, "flags": flags})
        return self.outcome(len(self.runs), flags)

    @property
    def trials(self):
        return [os.path.basename(run["job_dir"]) for run in self.runs]


@pytest.fixture
def fake(monkeypatch):
    trainer = FakeTrainer()
    monkeypatch.setattr(trials, "run", trainer)
    return trainer


def tune_in_process(capsys, search_dir, *flags, trainer_args=("--max-steps", "2")):
    """`python -m trainer.tune` in this process (exit code, stdout, stderr)."""
    argv = ["--job-dir", str(search_dir), "--parameters", "learning-rate,dropout", *flags, "--", *trainer_args]
    with trainer_logger_restored():
        code = cli.run(tune.main, argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_each_trial_runs_the_trainer_in_its_own_job_dir_sharing_one_token_cache(capsys, tmp_path, fake):
    code, _, _ = tune_in_process(capsys, tmp_path, "--max-trial-count", "2")
    assert code == 0 and fake.trials == ["1", "2"]
    for n, run in enumerate(fake.runs, 1):
        command = run["command"]
        assert command[:5] == [sys.executable, "-m", "trainer.task", "--max-steps", "2"]
        assert sorted(run["flags"]) == ["dropout", "learning-rate"]
        job_dir = ["--job-dir", str(tmp_path / "trials" / str(n)), "--cache-dir", str(tmp_path / "cache")]
        assert command[-4 - len(trials.SKIPPED) : -len(trials.SKIPPED)] == job_dir


def test_a_trial_skips_the_copies_and_the_report_even_when_the_trainer_flags_ask_for_them(capsys, tmp_path, fake):
    """Issue 37, 11: the search reads a trial's metrics.json only; the copies and the report took
    26 of a 1-trial search's 38 s."""
    tune_in_process(
        capsys,
        tmp_path,
        "--max-trial-count",
        "1",
        trainer_args=("--export-int8", "on", "--export-bfloat16", "on", "--export-onnx", "on", "--report", "on"),
    )
    trial = config.build_config(fake.runs[0]["command"][3:], environ={})
    assert (
        trial.runtime.export_bfloat16,
        trial.runtime.export_int8,
        trial.runtime.export_onnx,
        trial.output.report,
    ) == ("off", "off", "off", "off")


def test_a_cache_dir_among_the_trainer_flags_is_the_one_the_trials_share(capsys, tmp_path, fake):
    tune_in_process(
        capsys, tmp_path / "s", "--max-trial-count", "1", trainer_args=("--cache-dir", str(tmp_path / "mine"))
    )
    command = fake.runs[0]["command"]
    assert command.count("--cache-dir") == 1 and command[command.index("--cache-dir") + 1] == str(tmp_path / "mine")


def test_trials_csv_holds_every_trial_its_values_metric_and_duration(capsys, tmp_path, fake):
    tune_in_process(capsys, tmp_path, "--max-trial-count", "2")
    rows = read_csv(tmp_path / "trials.csv")
    assert list(rows[0]) == ["trial", "state", "learning-rate", "dropout", "val_macro_f1", "seconds", "error"]
    assert [(r["trial"], r["state"], r["seconds"], r["error"]) for r in rows] == [
        ("1", "finished", "2.0", ""),
        ("2", "finished", "2.0", ""),
    ]
    for row, run in zip(rows, fake.runs):
        assert (row["learning-rate"], row["dropout"]) == (run["flags"]["learning-rate"], run["flags"]["dropout"])
        assert float(row["val_macro_f1"]) == float(run["flags"]["dropout"])


def test_the_best_trial_is_printed_as_a_trainer_command(capsys, tmp_path, fake):
    _, out, _ = tune_in_process(capsys, tmp_path, "--max-trial-count", "3")
    best = max(fake.runs, key=lambda run: float(run["flags"]["dropout"]))["flags"]
    assert out.splitlines()[-1] == (
        f"python -m trainer.task --max-steps 2 --learning-rate {best['learning-rate']} --dropout {best['dropout']}"
    )


def test_a_metric_to_minimize_picks_the_lowest(capsys, tmp_path, fake):
    _, out, _ = tune_in_process(capsys, tmp_path, "--max-trial-count", "3", trainer_args=("--selection-metric", "loss"))
    lowest = min(fake.runs, key=lambda run: float(run["flags"]["dropout"]))["flags"]["dropout"]
    assert out.splitlines()[-1].endswith(f"--dropout {lowest}")


def test_a_failed_trial_is_recorded_with_its_error_and_the_search_goes_on(capsys, tmp_path, monkeypatch):
    def outcome(trial, flags):
        return trials.Outcome(None, "error: out of memory", 1.0) if trial == 1 else trials.Outcome(0.5, "", 1.0)

    fake = FakeTrainer(outcome)
    monkeypatch.setattr(trials, "run", fake)
    code, out, _ = tune_in_process(capsys, tmp_path, "--max-trial-count", "2")
    assert code == 0 and fake.trials == ["1", "2"]
    rows = read_csv(tmp_path / "trials.csv")
    assert [(r["state"], r["val_macro_f1"], r["error"]) for r in rows] == [
        ("failed", "", "error: out of memory"),
        ("finished", "0.5", ""),
    ]
    assert "trial 1/2  failed in 1s: error: out of memory" in out


def test_when_every_trial_fails_the_search_exits_1_with_one_error_line(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(trials, "run", FakeTrainer(lambda trial, flags: trials.Outcome(None, "error: boom", 1.0)))
    code, out, err = tune_in_process(capsys, tmp_path, "--max-trial-count", "2")
    assert code == 1
    assert err.splitlines() == [
        f"error: every trial failed; the last line each printed on stderr is in {tmp_path / 'trials.csv'}"
    ]
    assert "python -m trainer.task" not in out


def test_a_killed_search_reruns_its_running_trial_with_the_same_values_then_goes_on(capsys, tmp_path, monkeypatch):
    def killed_at_2(trial, flags):
        if trial == 2:
            raise KeyboardInterrupt
        return trials.Outcome(0.5, "", 1.0)

    first = FakeTrainer(killed_at_2)
    monkeypatch.setattr(trials, "run", first)
    assert tune_in_process(capsys, tmp_path, "--max-trial-count", "3")[0] == 130
    second = FakeTrainer()
    monkeypatch.setattr(trials, "run", second)
    assert tune_in_process(capsys, tmp_path, "--max-trial-count", "3")[0] == 0
    assert second.trials == ["2", "3"]
    assert second.runs[0]["flags"] == first.runs[1]["flags"]
    assert [r["state"] for r in read_csv(tmp_path / "trials.csv")] == ["finished"] * 3


def test_a_larger_budget_continues_a_search_with_new_trials_only(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(trials, "run", FakeTrainer())
    tune_in_process(capsys, tmp_path, "--max-trial-count", "2")
    more = FakeTrainer()
    monkeypatch.setattr(trials, "run", more)
    tune_in_process(capsys, tmp_path, "--max-trial-count", "3")
    assert more.trials == ["3"]
    assert len(read_csv(tmp_path / "trials.csv")) == 3


def test_rerunning_a_finished_search_runs_nothing_and_prints_its_summary_again(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(trials, "run", FakeTrainer())
    _, first_out, _ = tune_in_process(capsys, tmp_path, "--max-trial-count", "2")
    written = (tmp_path / "trials.csv").read_bytes()
    again = FakeTrainer()
    monkeypatch.setattr(trials, "run", again)
    code, out, _ = tune_in_process(capsys, tmp_path, "--max-trial-count", "2")
    assert code == 0 and again.runs == []
    assert out.splitlines()[-1] == first_out.splitlines()[-1]
    assert (tmp_path / "trials.csv").read_bytes() == written


def test_a_search_continued_with_other_trainer_flags_is_refused(capsys, tmp_path, fake):
    tune_in_process(capsys, tmp_path, "--max-trial-count", "1")
    code, _, err = tune_in_process(capsys, tmp_path, "--max-trial-count", "2", trainer_args=("--max-steps", "4"))
    assert code == 2 and len(fake.runs) == 1
    assert err.startswith(f"error: --job-dir: {tmp_path} holds a search with other settings (trainer_args: ")


def test_a_second_search_in_the_same_directory_is_refused_while_one_runs(capsys, tmp_path, fake):
    with search.locked(str(tmp_path)):
        code, _, err = tune_in_process(capsys, tmp_path, "--max-trial-count", "1")
    assert code == 2 and fake.runs == []
    assert err.splitlines() == [
        f"error: --job-dir: another trainer.tune is running a search in {tmp_path}; "
        "wait for it, or choose another --job-dir"
    ]


def test_trials_of_a_search_whose_study_is_gone_are_not_taken_for_new_ones(capsys, tmp_path, fake):
    tune_in_process(capsys, tmp_path, "--max-trial-count", "1")
    (tmp_path / "study.journal").unlink()
    code, _, err = tune_in_process(capsys, tmp_path, "--max-trial-count", "1")
    assert code == 2 and len(fake.runs) == 1
    assert err.startswith(f"error: --job-dir: {tmp_path} holds trials/ of a search whose study.journal is gone")


def test_the_same_seed_samples_the_same_trials(capsys, tmp_path, monkeypatch):
    runs = []
    for name in ("a", "b"):
        runs.append(FakeTrainer())
        monkeypatch.setattr(trials, "run", runs[-1])
        tune_in_process(capsys, tmp_path / name, "--max-trial-count", "2", "--sampler", "random", "--seed", "7")
    assert [r["flags"] for r in runs[0].runs] == [r["flags"] for r in runs[1].runs]


def test_each_finished_trial_logs_its_metric_the_best_so_far_and_an_eta():
    records = [search.Record(1, "finished", {}, 0.7, 30.0, ""), search.Record(2, "finished", {}, 0.6, 50.0, "")]
    assert (
        summary.finished_line(records[1], records, 5, "val_macro_f1", "maximize")
        == "trial 2/5  finished in 50s  val_macro_f1 0.6000  best 0.7000 (trial 1)  ETA 2m00s"
    )


# --- --finish-best: the best trial gets what every trial skips ----------------------------------


@pytest.fixture
def finishing(monkeypatch):
    """Stands in for finish.finish: records (job dir, trial) and returns the failures it is given."""
    calls, failures = [], []
    monkeypatch.setattr(
        finish, "finish", lambda job_dir, trial, trainer_config: calls.append((job_dir, trial)) or failures
    )
    return calls, failures


def test_finish_best_finishes_the_best_trial_after_the_search(capsys, tmp_path, fake, finishing):
    calls, _ = finishing
    code, out, _ = tune_in_process(capsys, tmp_path, "--max-trial-count", "3", "--finish-best")
    best = max(range(3), key=lambda n: float(fake.runs[n]["flags"]["dropout"])) + 1
    assert code == 0 and calls == [(str(tmp_path / "trials" / str(best)), best)]
    assert out.splitlines()[-1].startswith("python -m trainer.task")


def test_without_finish_best_no_trial_is_finished(capsys, tmp_path, fake, finishing):
    tune_in_process(capsys, tmp_path, "--max-trial-count", "1")
    assert finishing[0] == []


def test_a_failed_finishing_prints_the_best_command_then_one_error_line_and_exits_1(capsys, tmp_path, fake, finishing):
    finishing[1].append("trial 1's report: error: no rows")
    code, out, err = tune_in_process(capsys, tmp_path, "--max-trial-count", "1", "--finish-best")
    assert code == 1 and out.splitlines()[-1].startswith("python -m trainer.task")
    assert err.splitlines() == [
        "error: --finish-best: trial 1's report: error: no rows; rerun the same command to finish it"
    ]


def finished_trial(job_dir, platform="cpu"):
    """A finished trial's job dir as finish.py reads it: metrics.json with the device it ran on."""
    os.makedirs(job_dir / "model", exist_ok=True)
    (job_dir / "metrics.json").write_text(json.dumps({"device": {"platform": platform}}))
    return job_dir


ONNX = ["onnx", "onnx-int8"]


@pytest.mark.parametrize(
    "flags, platform, cpu_bf16, copies",
    [
        ([], "cpu", False, ["int8", *ONNX]),
        ([], "cpu", True, ["bfloat16", "int8", *ONNX]),
        ([], "gpu", False, ["int8", *ONNX]),
        (["--export-bfloat16", "on", "--export-int8", "off", "--export-onnx", "off"], "cpu", False, ["bfloat16"]),
        (["--encoder-backend", "hub"], "cpu", True, []),
        (["--encoder-backend", "hub", "--export-int8", "on"], "tpu", False, ["int8"]),
        (["--task", "token-classification"], "cpu", False, ["int8", *ONNX]),
    ],
)
def test_finishing_writes_the_copies_the_trainer_would_have_written(flags, platform, cpu_bf16, copies):
    assert finish.copies_wanted(config.build_config(flags, environ={}), platform, cpu_bf16) == copies


def test_finishing_writes_each_copy_then_the_report_with_the_tools_of_a_finished_run(tmp_path):
    job_dir = finished_trial(tmp_path / "2")
    steps = finish.missing_steps(str(job_dir), config.build_config([], environ={}), "flags : fpu avx512_bf16")
    model_dir = str(job_dir / "model")
    assert steps == [
        (
            "bfloat16 copy",
            [sys.executable, "-m", "trainer.export_quantized", "--model-dir", model_dir, "--precision", "bfloat16"],
        ),
        (
            "int8 copy",
            [sys.executable, "-m", "trainer.export_quantized", "--model-dir", model_dir, "--precision", "int8"],
        ),
        *[
            (
                f"{copy} copy",
                [sys.executable, "-m", "trainer.export_quantized", "--model-dir", model_dir, "--precision", copy],
            )
            for copy in ONNX
        ],
        ("report", [sys.executable, "-m", "trainer.report", "--job-dir", str(job_dir)]),
    ]


def test_finishing_again_writes_only_what_is_missing(tmp_path):
    job_dir = finished_trial(tmp_path / "2")
    (job_dir / "model" / "precisions.json").write_text(json.dumps({"int8": {"passed": True}}))
    (job_dir / "report.html").write_text("<html></html>")
    steps = finish.missing_steps(str(job_dir), config.build_config([], environ={}), "flags : fpu avx512_bf16")
    assert [what for what, _ in steps] == ["bfloat16 copy", "onnx copy", "onnx-int8 copy"]


def stand_in_steps(monkeypatch, *steps):
    """finish.missing_steps replaced by `steps`: (what, exit status, stderr line) as Python processes."""
    commands = [
        (what, [sys.executable, "-c", f"import sys; print({line!r}, file=sys.stderr); sys.exit({code})"])
        for what, code, line in steps
    ]
    monkeypatch.setattr(finish, "missing_steps", lambda job_dir, trainer_config, cpuinfo: commands)


def test_finishing_names_each_failed_step_by_its_last_stderr_line(tmp_path, monkeypatch):
    stand_in_steps(monkeypatch, ("int8 copy", 0, "ok"), ("report", 2, "error: --job-dir: no rows"))
    failures = finish.finish(str(finished_trial(tmp_path / "3")), 3, config.build_config([], environ={}))
    assert failures == ["trial 3's report: error: --job-dir: no rows"]
    assert (tmp_path / "3" / "stderr.txt").read_text() == "ok\nerror: --job-dir: no rows\n"


def test_a_copy_its_check_refused_is_not_a_failed_finishing(tmp_path, monkeypatch):
    """trainer.export_quantized exits 1 when the copy disagrees with float32: not written, as a
    trainer run leaves it (its own line says why)."""
    stand_in_steps(monkeypatch, ("int8 copy", 1, "int8 model refused, not written"), ("report", 0, ""))
    assert finish.finish(str(finished_trial(tmp_path / "1")), 1, config.build_config([], environ={})) == []


# --- bad input: one line, exit 2, nothing run or written -----------------------------------------


@pytest.mark.parametrize(
    "flags, trainer_args, message",
    [
        (["--max-trial-count", "0"], [], "--max-trial-count: must be >= 1, got 0"),
        (["--parameters", "learning-rate,momentum"], [], "--parameters: expected a comma-separated subset"),
        ([], ["--learning-rate", "1e-4"], "--learning-rate is tuned: the search sets it in every trial"),
        ([], ["--max-seq-length", "many"], "--max-seq-length: invalid integer value: 'many'"),
        ([], ["--job-dir", "elsewhere"], "--job-dir is not a trainer argument in a search"),
        ([], ["--model-dir=elsewhere"], "--model-dir is not a trainer argument in a search"),
        (["--job-dir", "gs://bucket/search"], [], "--job-dir: a local search keeps its study in a local directory"),
        (["--sampler", "grid"], [], "--sampler: invalid choice: 'grid'"),
    ],
)
def test_bad_input_is_one_error_line_exit_2_before_any_trial(
    capsys, tmp_path, monkeypatch, fake, flags, trainer_args, message
):
    monkeypatch.chdir(tmp_path)
    with trainer_logger_restored():
        code = cli.run(tune.main, ["--parameters", "learning-rate", *flags, "--", *trainer_args])
    out, err = capsys.readouterr()
    assert (code, out, fake.runs) == (2, "", [])
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and message in err
    assert os.listdir(tmp_path) == []


# --- one trial: a process, its stderr, its metrics.json ------------------------------------------


def test_a_failed_trial_s_error_is_the_last_line_it_printed_on_stderr(tmp_path):
    command = [sys.executable, "-c", "import sys; print('a warning', file=sys.stderr); sys.exit('error: no rows')"]
    outcome = trials.run(command, str(tmp_path / "1"), "val_macro_f1")
    assert (outcome.value, outcome.error) == (None, "error: no rows")
    assert (tmp_path / "1" / "stderr.txt").read_text() == "a warning\nerror: no rows\n"


def test_a_trial_that_finished_before_the_search_was_killed_is_read_not_rerun(tmp_path):
    (tmp_path / "metrics.json").write_text(json.dumps({"validation": {"macro_f1": 0.75}, "durations": {"total": 12.5}}))
    outcome = trials.run([sys.executable, "-c", "raise SystemExit(3)"], str(tmp_path), "val_macro_f1")
    assert outcome == trials.Outcome(0.75, "", 12.5)


# --- real searches on the tiny encoder -----------------------------------------------------------


def tiny_trainer_args(tiny_encoder_dir, tiny_data):
    return [
        "--encoder",
        tiny_encoder_dir,
        "--training-file",
        tiny_data["train"],
        "--validation-file",
        tiny_data["validation"],
        "--max-steps",
        "2",
        "--batch-size",
        "8",
        "--max-seq-length",
        "16",
        "--mixed-precision",
        "off",
        "--report-errors",
        "0",
        *TINY_TASK_FLAGS,
        "--export-bfloat16",
        "off",
    ]  # int8 'auto': the copy --finish-best writes


def tune_command(search_dir, budget, trainer_args, *flags):
    return [
        sys.executable,
        "-m",
        "trainer.tune",
        "--job-dir",
        str(search_dir),
        "--max-trial-count",
        str(budget),
        "--parameters",
        "learning-rate,dropout",
        *flags,
        "--",
        *trainer_args,
    ]


def started(stdout):
    """The trials a run started: [(trial, flags)], from its `trial N/B  started  FLAGS` lines."""
    return [
        (line.split()[2].split("/")[0], line.split("started")[1].split("(log")[0].strip())
        for line in stdout.splitlines()
        if "  started  " in line
    ]


@pytest.fixture(scope="module")
def searched(tiny_encoder_dir, tiny_data, tmp_path_factory):
    """A real search, killed during its first trial, rerun to finish it (budget 1), continued to
    2 trials and rerun once finished, with --finish-best: the four runs' results."""
    search_dir = tmp_path_factory.mktemp("tune") / "search"
    args = tiny_trainer_args(tiny_encoder_dir, tiny_data)
    env = {**os.environ, "VBT_CACHE_DIR": os.environ.get("VBT_CACHE_DIR", "/tmp/vbt-test-cache")}
    killed = subprocess.Popen(
        tune_command(search_dir, 1, args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    lines = [killed.stdout.readline()]
    while lines[-1] and "  started  " not in lines[-1]:  # "": the search ended on its own
        lines.append(killed.stdout.readline())
    trainer_started = search_dir / "trials" / "1" / "stderr.txt"
    for _ in range(100):
        if trainer_started.exists():
            break
        time.sleep(0.1)
    killed.send_signal(signal.SIGTERM)
    out, err = killed.communicate(timeout=60)
    runs = {"killed": subprocess.CompletedProcess(killed.args, killed.returncode, "".join(lines) + out, err)}
    for name, budget, flags in (("resumed", 1, ()), ("continued", 2, ()), ("finished", 2, ("--finish-best",))):
        runs[name] = subprocess.run(
            tune_command(search_dir, budget, args, *flags), capture_output=True, text=True, timeout=300, env=env
        )
    return search_dir, runs


@pytest.mark.slow
def test_a_killed_search_stops_its_trial_and_says_how_to_continue(searched):
    search_dir, runs = searched
    assert runs["killed"].returncode == 130
    assert (search_dir / "trials" / "1" / "stderr.txt").exists()
    assert runs["killed"].stderr.splitlines()[-1].startswith("error: stopped; rerun the same command to continue")


@pytest.mark.slow
def test_the_rerun_runs_the_killed_trial_again_with_its_values(searched):
    _, runs = searched
    assert runs["resumed"].returncode == 0, runs["resumed"].stderr
    assert started(runs["resumed"].stdout) == started(runs["killed"].stdout)


@pytest.mark.slow
def test_a_continued_search_runs_only_the_new_trial(searched):
    _, runs = searched
    assert runs["continued"].returncode == 0, runs["continued"].stderr
    assert [trial for trial, _ in started(runs["continued"].stdout)] == ["2"]


@pytest.mark.slow
def test_trials_csv_has_each_trials_values_and_the_metric_its_run_wrote(searched):
    search_dir, _ = searched
    rows = read_csv(search_dir / "trials.csv")
    assert [(r["trial"], r["state"]) for r in rows] == [("1", "finished"), ("2", "finished")]
    for row in rows:
        metrics = json.loads((search_dir / "trials" / row["trial"] / "metrics.json").read_text())
        assert float(row["val_macro_f1"]) == metrics["validation"]["macro_f1"]
        assert float(row["dropout"]) == pytest.approx(metrics["hyperparameters"]["dropout"])
        assert float(row["seconds"]) > 0


@pytest.mark.slow
def test_the_trials_share_one_token_cache(searched):
    search_dir, _ = searched
    assert os.listdir(search_dir / "cache" / "tokens")
    assert not (search_dir / "trials" / "1" / "cache").exists()


@pytest.mark.slow
def test_the_printed_command_runs_the_best_trials_values(searched):
    search_dir, runs = searched
    rows = read_csv(search_dir / "trials.csv")
    best = max(rows, key=lambda r: float(r["val_macro_f1"]))
    argv = shlex.split(runs["continued"].stdout.splitlines()[-1])
    assert argv[:3] == ["python", "-m", "trainer.task"]
    run_config = config.build_config(argv[3:], environ={})
    assert run_config.train.learning_rate == float(best["learning-rate"])
    assert run_config.model.dropout == float(best["dropout"])


@pytest.mark.slow
def test_rerunning_the_finished_search_runs_nothing_and_prints_the_same_best_command(searched):
    _, runs = searched
    assert runs["finished"].returncode == 0
    assert started(runs["finished"].stdout) == []
    assert runs["finished"].stdout.splitlines()[-1] == runs["continued"].stdout.splitlines()[-1]


def best_and_other_trial(search_dir):
    """The job dirs of the best trial (the first of equals, as the search picks it) and the other."""
    rows = read_csv(search_dir / "trials.csv")
    best = max(rows, key=lambda r: float(r["val_macro_f1"]))
    (other,) = [r for r in rows if r is not best]
    return search_dir / "trials" / best["trial"], search_dir / "trials" / other["trial"]


@pytest.mark.slow
def test_a_trial_writes_its_float32_model_and_metrics_but_no_copies_and_no_report(searched):
    _, other = best_and_other_trial(searched[0])
    assert (other / "metrics.json").exists() and (other / "model" / "saved_model.pb").exists()
    assert not (other / "report.html").exists() and not (other / "errors.csv").exists()
    assert not (other / "model" / "int8").exists() and not (other / "model" / "precisions.json").exists()


@pytest.mark.slow
def test_finish_best_gives_the_best_trial_its_report_and_the_copies_its_flags_ask_for(searched):
    best, _ = best_and_other_trial(searched[0])
    assert (best / "report.html").exists() and (best / "MODEL_CARD.md").exists()
    assert json.loads((best / "model" / "precisions.json").read_text())["int8"]["passed"]
    assert (best / "model" / "int8" / "model.tflite").exists() and not (best / "model" / "bfloat16").exists()
