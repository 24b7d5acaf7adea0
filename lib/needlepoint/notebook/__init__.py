"""Notebooks: the papermill pipeline, where they write, and every notebook's steps and views."""
