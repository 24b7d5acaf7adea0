"""Analysis: the preregistered primary analysis, bootstrap, secondary tables, power, figures.

The third stage: one run's rows become analysis.json, summary.md and figures. It imports from
``design`` and ``run`` and never from a later stage.
"""
