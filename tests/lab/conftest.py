"""The lab's slow tests read the same end-to-end run as the integration tests: ``small_pipeline`` (``ELMO.py`` then
``classification.py`` on the tiny corpus, made once per test run; never modify it: copy first)."""

from integration.conftest import small_pipeline  # noqa: F401 (a fixture, found by name)
