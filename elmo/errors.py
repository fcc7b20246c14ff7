"""The project's one user-facing error type.

Every failure a user can cause (a missing file, a malformed CSV row, a bad flag, a checkpoint that is not ours)
raises :class:`ElmoError` with a message that names the file, line or argument, and records the config field or
argument in :attr:`ElmoError.field`; :mod:`elmo.cli` spells it as the flag and exits with status 2.
"""

from __future__ import annotations


class ElmoError(Exception):
    """A user-facing error: bad input data, a bad argument or a missing/invalid model file.

    Args:
        message: what went wrong, naming the file, line, field or argument.
        field: the value the error is about, as the message spells it: ``"Owner.field"`` for a config
            dataclass field (e.g. ``"ClassifierConfig.token_embedding_dim"``; other fields of the same
            ``Owner`` the message names may be translated too) or a bare argument name (``"val_fraction"``);
            ``None`` when the error is not about one value. ``field=True`` / ``field=False`` in the message
            reads as a boolean flag's ``--flag`` / ``--no-flag``.

    Attributes:
        field: as given.
    """

    def __init__(self, message: str = "", field: str | None = None):
        super().__init__(message)
        self.field = field
