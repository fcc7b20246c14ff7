"""Where and how code runs: device, mixed precision, threads, seeds (:mod:`.device`) and the
``torchrun`` process group (:mod:`.distributed`). Imports nothing of the project above :mod:`elmo.errors`."""
