"""Benchmarks that print figures (speed, memory, scaling); not part of the library's import surface.

``python -m lab bench`` (:mod:`.speed`, with ``--published`` :mod:`.published` and ``--training``
:mod:`.published_training`) and ``python -m lab bench-scale`` (:mod:`.scale`); they run their measurements in
child processes (:mod:`.children`) so peak memory is per measurement, and share the FLOP counts and the measured
matrix-product peaks of :mod:`.flops`.
"""
