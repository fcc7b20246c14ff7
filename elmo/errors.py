"""The project's one user-facing error type, :class:`ElmoError`, raised by every failure a user can cause (a missing
file, a malformed CSV row, a bad flag, a checkpoint that is not ours), and the configs' range checks
(:func:`check_fields`)."""

from __future__ import annotations

from typing import Any, Callable


class ElmoError(Exception):
    """A user-facing error: bad input data, a bad argument or a missing/invalid model file; ``message`` names the
    file, line, field or argument (:mod:`elmo.cli` prints it as one line and exits with status 2). ``field`` (kept as
    an attribute): the value the error is about, as the message spells it: ``"Owner.field"`` for a config dataclass
    field (e.g. ``"ClassifierConfig.token_embedding_dim"``; other fields of the same ``Owner`` the message names may be
    translated too) or a bare argument name (``"val_fraction"``); ``None`` when the error is not about one value.
    ``field=True`` / ``field=False`` in the message reads as a boolean flag's ``--flag`` / ``--no-flag``."""

    def __init__(self, message: str = "", field: str | None = None):
        super().__init__(message)
        self.field = field


def check_fields(config: Any, *checks: tuple[str, bool | Callable[[Any], bool], str]) -> None:
    """Raise :class:`ElmoError` ``<Owner>.<field> must be <rule>, got <value>`` (a ``str`` value as its ``repr``;
    :attr:`ElmoError.field` ``"<Owner>.<field>"``, ``<Owner>`` the class of ``config``) for the first of ``checks``,
    ``(field, ok, rule)``, that fails: ``ok`` is whether ``config.<field>`` is valid, or a test ``ok(value)`` of it,
    called only when the checks before it pass (for a value that could make the test raise TypeError)."""
    for name, ok, rule in checks:
        value = getattr(config, name)
        if not (ok(value) if callable(ok) else ok):
            where = f"{type(config).__name__}.{name}"
            raise ElmoError(f"{where} must be {rule}, got {repr(value) if isinstance(value, str) else value}", field=where)
