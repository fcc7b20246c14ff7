"""Where and how code runs: device, mixed precision, threads, seeds and the ``torchrun`` process group."""
