"""``report.pdf`` from ``results/*.json`` and ``images/`` (``python -m elmo report``)."""

from .pdf import ReportConfig, make_report

__all__ = ["ReportConfig", "make_report"]
