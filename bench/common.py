"""What several benchmarks share: timing rounds, and finishing with a JSON file."""
import json
import shutil
import statistics
import time


def timed(function, rounds: int) -> float:
    """Median seconds of `rounds` calls after one untimed call (tracing, warm-up)."""
    function()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def finish(result: dict, json_path=None, work=None) -> dict:
    """Writes `result` to `json_path` (when given), removes the scratch dir `work`, returns it."""
    if json_path:
        with open(json_path, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
    if work:
        shutil.rmtree(work, ignore_errors=True)
    return result
