"""The analysis tests' one prepared design: made once per test module, read-only."""

from __future__ import annotations

import pytest
from support.results import make_prepared

from needlepoint.design.prepared import Prepared


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Prepared:
    """The design the analysis tests build their runs on (``support.results.make_prepared``)."""
    return make_prepared(tmp_path_factory)
