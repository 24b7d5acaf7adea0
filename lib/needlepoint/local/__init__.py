"""Local: serve a model that a Python package ships, offline, and run the pipeline against it."""
