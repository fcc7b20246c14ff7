"""``report.pdf`` from ``results/*.json`` and ``images/`` (``python -m elmo report``).

Modules, one concept each: :mod:`~elmo.report.results` (reading the JSON, the methods, what a
diagnostic run changed), :mod:`~elmo.report.analysis` (every comparative sentence),
:mod:`~elmo.report.figures` (the summary figures), :mod:`~elmo.report.tables` (the Markdown tables)
and :mod:`~elmo.report.pdf` (the reportlab layout, :func:`make_report` and its flags).
"""

from .analysis import analysis
from .pdf import ReportArgs, build_report, make_report
from .results import load_results
from .tables import experiments_table, markdown_table

__all__ = ["ReportArgs", "analysis", "build_report", "experiments_table", "load_results", "make_report",
           "markdown_table"]
