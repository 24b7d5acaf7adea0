"""needlepoint: frozen, audited context-retrieval experiments on LLMs."""

__version__ = "0.1.0"
