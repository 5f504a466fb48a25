"""The one exception type users see: a clear message and a non-zero exit, never a traceback."""


class UserError(Exception):
    """Bad input, a bad flag combination or an unreachable path.

    The message names the file, row, column or flag at fault; `trainer.task` and the other entry
    points print it on one line and exit with `exit_code`.
    """

    exit_code = 2
