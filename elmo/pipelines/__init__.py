"""What the commands run, end to end (the layers and their modules: docs/architecture.md)."""
