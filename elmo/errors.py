"""The project's one user-facing error type.

Every failure a user can cause (a missing file, a malformed CSV row, a bad flag, a checkpoint that
is not ours) raises :class:`ElmoError` with a message that names the file, line or argument. The
command-line scripts turn it into a one-line message and exit code 2; library users can catch it.
"""


class ElmoError(Exception):
    """A user-facing error: bad input data, a bad argument or a missing/invalid model file."""
