"""Progress lines for long loops (prediction, tokenization): rows done, rows/s and ETA.

The lines are the trainer's log lines (`HH:MM:SS message` through the "trainer" logger, so they
reach stdout, training.log and Cloud Logging alike), in training's style: two spaces between
fields, durations as `1m05s`. At most one line per `interval` seconds, on a terminal or not, and
none for a loop that ends within the first interval.

Not tqdm: tqdm draws a bar redrawn in place with carriage returns, which is right on a terminal
but arrives in captured logs (Vertex AI, training.log) as one long `\r`-joined line or as lines
without the logger's timestamp; routing it through the logger takes a custom file object and
bar format, and would add a dependency to the image for the arithmetic below.
"""

import logging
import time
from collections.abc import Callable

log = logging.getLogger("trainer")


def clock(seconds: float) -> str:
    """42s, 3m07s: the duration format of every progress line."""
    seconds = int(round(max(0.0, seconds)))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def rate(rows: int, seconds: float) -> str:
    """`812.3 rows/s`, or below one row a second `12.5 s/row` (not "0.0 rows/s")."""
    if rows and rows < seconds:
        return f"{seconds / rows:,.1f} s/row"
    return f"{rows / max(seconds, 1e-9):,.1f} rows/s"


class Progress:
    """`what 4,096/12,284 rows (33%)  812.3 rows/s  ETA 10s`, at most once per `interval`."""

    def __init__(
        self, what: str, interval: float, total: int | None = None, timer: Callable[[], float] = time.monotonic
    ):
        self.what, self.interval, self.total, self.timer = what, interval, total, timer
        self.start = self.last = timer()
        self.lines = 0

    def update(self, rows: int, fraction: float | None = None) -> None:
        """`rows` done so far; `fraction` of the work done when rows cannot tell it (a stream
        of unknown length: the share of its bytes read)."""
        now = self.timer()
        if now - self.last < self.interval:
            return
        self.last = now
        if fraction is None and self.total:
            fraction = rows / self.total
        elapsed = max(now - self.start, 1e-9)
        fields = [
            f"{self.what} {rows:,}{f'/{self.total:,}' if self.total else ''} rows"
            + (f" ({fraction:.0%})" if fraction is not None else ""),
            rate(rows, elapsed),
        ]
        if fraction:
            fields.append(f"ETA {clock(elapsed / fraction - elapsed)}")
        log.info("  ".join(fields))
        self.lines += 1

    def seconds(self) -> float:
        return self.timer() - self.start
