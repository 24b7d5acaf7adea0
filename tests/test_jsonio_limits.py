"""jsonio's input-file size limit at its exact boundary: 64 MiB is read, one byte more is not."""

from __future__ import annotations

from pathlib import Path

import pytest

from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import read_json

# Written out here, not imported: a test that read the constant would follow any change to it.
LIMIT = 67_108_864  # 64 MiB


def padded(path: Path, size: int) -> Path:
    """A valid JSON document of exactly ``size`` bytes: a string, then trailing spaces."""
    path.write_bytes(b'"ok"' + b" " * (size - 4))
    return path


def test_a_json_file_of_exactly_64_mib_is_read(tmp_path: Path) -> None:
    assert read_json(padded(tmp_path / "big.json", LIMIT)) == "ok"


def test_a_json_file_one_byte_over_64_mib_is_refused_unread(tmp_path: Path) -> None:
    path = padded(tmp_path / "big.json", LIMIT + 1)
    with pytest.raises(NeedlepointError) as caught:
        read_json(path)
    assert str(caught.value) == (
        f"{path}: {LIMIT + 1} bytes, larger than the limit of {LIMIT} bytes; not read"
    )
