"""Every benchmark table README, docs/benchmarks.md and docs/performance.md quote is a committed
result, pasted as the script printed it."""

import json
import os
import re
import sys

import pytest
from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "bench"))
import common  # noqa: E402

RESULT = re.compile(r"bench/results/\d{4}-\d\d-\d\d-[\w.-]+\.json")
FENCE = re.compile(r"^```(\w*)$")


def fenced_blocks(markdown: str):
    """(section, language, the text just before the block, the block's lines) per fenced block."""
    section, before, lines, block, language = "", [], markdown.splitlines(), None, ""
    for line in lines:
        fence = FENCE.match(line)
        if block is None and fence:
            block, language = [], fence.group(1)
        elif block is not None and line == "```":
            yield section, language, "\n".join(before[-8:]), block
            block, before = None, []
        elif block is not None:
            block.append(line)
        else:
            section = line[3:] if line.startswith("## ") else section
            before.append(line)


def quoted_tables(markdown: str, section_name="Benchmarks"):
    """The untagged blocks (in `section_name`, or anywhere when None) and the result files cited
    just before each: untagged blocks are what a script printed, commands are tagged `sh`."""
    return [
        (RESULT.findall(text), block)
        for section, language, text, block in fenced_blocks(markdown)
        if section_name in (None, section) and language in ("", "text")
    ]


def read(path: str) -> str:
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


README_TABLES = quoted_tables(read("README.md"), None)
BENCHMARK_TABLES = quoted_tables(read("docs/benchmarks.md"), None)
PERFORMANCE_TABLES = quoted_tables(read("docs/performance.md"), None)
TABLES = README_TABLES + BENCHMARK_TABLES + PERFORMANCE_TABLES


def test_the_benchmarks_page_and_the_performance_log_quote_benchmark_tables():
    assert len(BENCHMARK_TABLES) >= 3 and len(PERFORMANCE_TABLES) >= 3


@pytest.mark.parametrize("cited, block", TABLES, ids=[b[0].strip()[:40] for _, b in TABLES])
def test_each_quoted_table_is_printed_by_a_committed_result(cited, block):
    assert cited, f"a benchmark table with no bench/results/*.json cited just before it: {block[:2]}"
    printed = []
    for path in cited:
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            result = json.load(f)
        printed += [line.rstrip() for line in result["printed"].splitlines()]
    missing = [line for line in block if line.strip() and line.rstrip() not in printed]
    assert not missing, f"lines not printed by {', '.join(cited)}: {missing}"


def test_every_result_the_docs_cite_is_committed():
    docs = [os.path.join(ROOT, "README.md")] + [
        os.path.join(ROOT, "docs", name) for name in os.listdir(os.path.join(ROOT, "docs")) if name.endswith(".md")
    ]
    cited = {path for doc in docs for path in RESULT.findall(open(doc, encoding="utf-8").read())}
    assert cited
    assert not [path for path in cited if not os.path.isfile(os.path.join(ROOT, path))]


def test_every_committed_result_names_its_machine_and_script():
    folder = os.path.join(ROOT, "bench", "results")
    for name in os.listdir(folder):
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            result = json.load(f)
        assert {"cpu", "cpus", "native"} <= set(result["machine"]), name
        assert os.path.exists(os.path.join(ROOT, result["script"])), name
        assert name.startswith(result["finished"][:10]), name


def test_a_table_is_read_with_the_result_cited_just_before_it():
    readme = "## Benchmarks\n\n`bench/results/2026-01-02-cpu-x.json`:\n\n```\nrow  1.0\n```\n"
    assert quoted_tables(readme) == [(["bench/results/2026-01-02-cpu-x.json"], ["row  1.0"])]
    assert quoted_tables("## Benchmarks\n\n```bash\npython bench/run.py\n```\n") == []
    assert quoted_tables("## Other\n\n```\nrow  1.0\n```\n") == []
    assert quoted_tables("## Other\n\n```\nrow  1.0\n```\n", None) == [([], ["row  1.0"])]


def test_a_second_result_of_the_same_day_and_machine_never_overwrites_the_first(tmp_path, capsys):
    first = common.publish("run", {"machine": {"cpu": "AMD EPYC 7B13", "native": "avx2"}}, "a\n", str(tmp_path))
    second = common.publish("run", {"machine": {"cpu": "AMD EPYC 7B13", "native": "avx2"}}, "b\n", str(tmp_path))
    assert os.path.basename(first).endswith("-epyc-avx2-run.json")
    assert second == first[: -len(".json")] + "-2.json"
    with open(first, encoding="utf-8") as f:
        assert json.load(f)["printed"] == "a\n"


def test_the_machine_tag_says_which_native_arithmetic_the_figures_had():
    flags = "flags\t\t: fpu sse2 avx2 avx512f avx512_bf16\n"
    assert common.cpu_flags(f"processor\t: 0\n{flags}") >= {"avx512_bf16", "avx2"}
    assert common.machine_tag({"cpu": "Intel(R) Xeon(R) Platinum 8481C", "native": "amx"}) == "xeon-amx"


def test_a_result_records_the_variables_that_change_what_was_measured():
    env = {"PYTHONPATH": "/tmp/before", "TF_ENABLE_ONEDNN_OPTS": "0", "HOME": "/root"}
    assert common.environment(env) == {"PYTHONPATH": "/tmp/before", "TF_ENABLE_ONEDNN_OPTS": "0"}


EPYC = {"cpu": "AMD EPYC 7B13", "cpus": 2, "native": "avx512bf16", "python": "3.11.9"}
XEON = {"cpu": "Intel(R) Xeon(R) CPU @ 2.20GHz", "cpus": 2, "native": "avx512", "python": "3.11.9"}


def test_a_kept_run_is_reused_on_the_machine_that_measured_it(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "machine", lambda: EPYC)
    job = str(tmp_path / "wikiann-mpnet")
    common.kept_here(job)  # before the run: records where it is measured
    os.makedirs(job)
    common.kept_here(job)
    with open(tmp_path / "wikiann-mpnet.machine.json", encoding="utf-8") as f:
        assert json.load(f) == {"cpu": "AMD EPYC 7B13", "cpus": 2, "native": "avx512bf16"}


def test_a_kept_run_from_another_cpu_is_refused_with_one_line(tmp_path, monkeypatch, capsys):
    result = str(tmp_path / "wikiann-mpnet-reference.json")
    monkeypatch.setattr(common, "machine", lambda: EPYC)
    common.kept_here(result)
    open(result, "w").close()
    monkeypatch.setattr(common, "machine", lambda: XEON)
    with pytest.raises(SystemExit) as stop:
        common.kept_here(result)
    assert stop.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith(f"error: {result} was measured on {{'cpu': 'AMD EPYC 7B13'")
    assert error.count("\n") == 1
    assert "remove it" in error and os.path.exists(result)


def test_a_kept_run_that_records_no_machine_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(common, "machine", lambda: EPYC)
    os.makedirs(tmp_path / "wnut17-default")
    with pytest.raises(SystemExit):
        common.kept_here(str(tmp_path / "wnut17-default"))
    assert "measured on a machine it did not record" in capsys.readouterr().err


def test_a_recipe_run_measured_on_another_cpu_is_not_reused(tmp_path, monkeypatch):
    import recipe

    job = tmp_path / "mrpc" / "defaults-s0"
    os.makedirs(job.parent)
    monkeypatch.setattr(common, "machine", lambda: XEON)
    common.kept_here(str(job))
    os.makedirs(job)
    (job / "metrics.json").write_text('{"durations": {"train": 812.0}}')
    monkeypatch.setattr(common, "machine", lambda: EPYC)
    with pytest.raises(SystemExit) as stop:
        recipe.run_one("mrpc", {}, [], 0, str(job), str(tmp_path / "cache"))
    assert stop.value.code == 2


def test_a_teacher_trained_elsewhere_is_read_without_a_machine_record(tmp_path, monkeypatch):
    import argparse

    import distill

    monkeypatch.setattr(common, "machine", lambda: EPYC)
    teacher = tmp_path / "teacher"
    os.makedirs(teacher)
    (teacher / "metrics.json").write_text('{"durations": {"train": 4321.0}}')
    args = argparse.Namespace(teacher_job=str(teacher))
    assert distill.finished_run("teacher", str(teacher), [], args) == {"durations": {"train": 4321.0}}
