"""How the project measures itself: the seeds study and learning curves, the speed and memory benchmark, the
``report.pdf`` writer and the README generator. ``lab`` imports :mod:`elmo`; :mod:`elmo` never imports ``lab``
(an import-linter contract in ``pyproject.toml``). Its commands: ``python -m lab --help``."""
