"""Compare: runs of one design side by side, each analysed alone, never pooled.

The fourth stage: several run folders of one design (one design fingerprint) become
comparison.json, comparison.md and figures. It imports from ``analysis`` and below, never from a
later stage.
"""
