"""``report.pdf`` from ``results/*.json`` and ``images/`` (``python -m lab report``).

Modules, one concept each: :mod:`~lab.report.results` (reading the JSON, the methods, what a
diagnostic run changed), :mod:`~lab.report.analysis` (every comparative sentence),
:mod:`~lab.report.figures` (the summary figures), :mod:`~lab.report.tables` (the Markdown tables)
and :mod:`~lab.report.pdf` (the reportlab layout, :func:`make_report` and its flags).
"""

from .analysis import analysis
from .pdf import ReportArgs, build_report, make_report
from .results import load_results
from .tables import experiments_table, markdown_table

__all__ = ["ReportArgs", "analysis", "build_report", "experiments_table", "load_results", "make_report",
           "markdown_table"]
