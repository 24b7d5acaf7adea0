"""Notebook support: the papermill pipeline, output redirection and reproducible display."""
