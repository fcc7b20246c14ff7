"""Benchmarks that print figures (speed, memory, scaling); not part of the library's import surface.

``python -m elmo bench`` (:mod:`.speed`) and ``python -m elmo bench-scale`` (:mod:`.scale`); both run
their measurements in child processes (:mod:`.children`) so peak memory is per measurement.
"""
