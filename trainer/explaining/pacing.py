"""How long explaining takes: each call of an export's `explain_tokens` sized to about
CALL_SECONDS, and an optional budget of seconds that further work must fit in (report.html's).

Calls are sized by their measured time, not by a count of tokens alone: a call of a saved
tf.function runs inside TensorFlow's runtime, and Python raises KeyboardInterrupt only when it
returns. A base-sized BERT (a random one, measured) integrates about 370 tokens a second,
forward and backward, on this project's 2-core CPU, so one call of 16,384 tokens, the memory
bound alone, runs about 45 s, more under load, during which Ctrl-C does nothing. Calls of
about two seconds stop within seconds of Ctrl-C (2.5 s measured) and cost no throughput that
could be measured (8,448 tokens: 32-40 s of calls either way). A small model's calls grow to
TOKENS_PER_CALL, the bound on a call's memory: each point's activations and gradients are
held until the call returns.
"""

import time
from collections.abc import Callable

TOKENS_PER_CALL = 16_384  # the most a call holds, however fast it runs
CALL_SECONDS = 2.0  # what a call should take: Ctrl-C waits for the call that is running
FIRST_CALL_TOKENS = 256  # before any call is timed: 1-2 s for a base-sized model on 2 CPU cores


class Pace:
    """Sizes the calls of one explaining job and keeps its budget.

    `budget`: seconds from now that the work may take (None: no limit). Work is started only
    when its estimated time (its tokens at the rate of the last call) fits in what is left;
    the first call always starts, so the smallest budget still explains something. What a
    budget left out is recorded in `left_out` by the caller (attribute.explain_texts)."""

    def __init__(
        self,
        budget: float | None = None,
        call_seconds: float = CALL_SECONDS,
        timer: Callable[[], float] = time.monotonic,
    ):
        self.budget, self.call_seconds, self.timer = budget, call_seconds, timer
        self.start = timer()
        self.tokens = FIRST_CALL_TOKENS  # the next call's size
        self.seconds_per_token: float | None = None
        self.left_out: list[tuple[int, str | None]] = []  # (text, target) not explained

    def spent(self) -> float:
        return self.timer() - self.start

    def fits(self, tokens: int) -> bool:
        """Whether work of `tokens` tokens fits in the budget's remainder."""
        if self.budget is None or self.seconds_per_token is None:
            return True
        return self.spent() + tokens * self.seconds_per_token <= self.budget

    def rows(self, width: int, rows: int, points: int) -> int:
        """How many of `rows` rows `width` tokens wide one call takes, at `points` path points
        or fewer each."""
        points = min(points, max(1, self.tokens // width))
        return max(1, min(rows, self.tokens // (points * width)))

    def points(self, width: int, rows: int, points: int) -> int:
        """How many of `points` points of `rows` rows one call takes."""
        return max(1, min(points, self.tokens // (rows * width)))

    def call(self, tokens: int, function, *args):
        """`function(*args)`, a call of `tokens` tokens, timed: the next calls are sized by
        its rate."""
        started = self.timer()
        result = function(*args)
        elapsed = self.timer() - started
        self.seconds_per_token = elapsed / tokens
        self.tokens = (
            TOKENS_PER_CALL
            if elapsed <= 0
            else max(1, min(TOKENS_PER_CALL, int(self.call_seconds / self.seconds_per_token)))
        )
        return result
