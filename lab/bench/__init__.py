"""Benchmarks that print figures (speed, memory, scaling); not part of the library's import surface.

``python -m lab bench`` (:mod:`.speed`) and ``python -m lab bench-scale`` (:mod:`.scale`); both run
their measurements in child processes (:mod:`.children`) so peak memory is per measurement.
"""
