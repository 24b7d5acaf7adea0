"""Analysis: one run's rows become the preregistered decision, analysis.json, summary.md, figures.

The third stage. It imports from ``design`` and ``run`` and never from a later stage.
"""
