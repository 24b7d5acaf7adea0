"""Freezing a design for your model, from a notebook or a message: reuse, and the command.

``prepare`` refuses any folder that is not new or empty, so nothing is ever overwritten. Two
things a user running their own model meets around it live here, outside ``prepared.py``
(whose source is fingerprinted in every manifest, so that only what decides the materials is
there):

- ``prepare_or_reuse``: running the freeze notebook again (Jupyter's "Run All") used to stop
  with a traceback on its own earlier output; a folder that already holds exactly the bytes
  the protocol generates is now reused, and any other is refused in one line saying what to
  delete.
- ``prepare_command``: the exact `needlepoint prepare` command that freezes a prepared folder's
  design for another model, printed wherever a model does not match a prepared folder.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from needlepoint.design import protocol as protocol_mod
from needlepoint.design.generate import generate
from needlepoint.design.prepared import load_protocol, manifest_bytes, prepare_protocol
from needlepoint.errors import NeedlepointError, looks_like_secret


def prepare_or_reuse(
    out_dir: str | Path,
    protocol_path: str | Path | None = None,
    *,
    model: str | None = None,
    body_profile: str | None = None,
) -> tuple[Path, bool]:
    """``prepare``, except that a folder already holding exactly these bytes is reused.

    Nothing is overwritten either way: a folder whose every file is byte-identical to what the
    protocol generates is what this call would write, so it is returned (``True``: reused).
    """
    protocol = load_protocol(protocol_path, model=model, body_profile=body_profile)
    out = Path(out_dir)
    if not (out.is_dir() and any(out.iterdir())):
        return prepare_protocol(out, protocol), False
    protocol_mod.validate(protocol, f"{out}/protocol.json")
    files = generate(protocol)
    files["manifest.json"] = manifest_bytes(files, protocol)
    if _holds_exactly(out, files):
        return out, True
    raise NeedlepointError(
        f"{out}: holds another prepared folder (another protocol, model or body profile); "
        f"delete {out} (a notebook run from notebooks/ writes under notebooks/work/, which may "
        "be deleted whole) or choose another prepared_dir"
    )


def _holds_exactly(folder: Path, files: dict[str, bytes]) -> bool:
    """Whether ``folder`` holds these files, byte for byte, and nothing else (sizes first, so
    an oversized stray file is never read)."""
    names = sorted(p.name for p in folder.iterdir())
    if names != sorted(files):
        return False
    for name, data in sorted(files.items()):
        path = folder / name
        if path.is_symlink() or not path.is_file() or path.stat().st_size != len(data):
            return False
        if path.read_bytes() != data:
            return False
    return True


def prepare_command(prepared_dir: str | Path, model: str) -> str:
    """The exact command that freezes the design of ``prepared_dir`` for ``model``.

    Its protocol.json is a complete protocol file, so the variant keeps the design (and its
    design fingerprint) whatever override made the folder; the new folder is named after the
    model. A "model" that looks like a key (pasted in the wrong place) is never echoed: a
    placeholder stands for it.
    """
    if looks_like_secret(model) or not model.isprintable():
        model = "MODEL"
    base = Path(prepared_dir)
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", model).strip("-.")[:40] or "model"
    out = base.with_name(f"{base.name}-{slug}")
    return (
        f"needlepoint prepare --protocol {shlex.quote(str(base / 'protocol.json'))} "
        f"--model {shlex.quote(model)} --out {shlex.quote(str(out))}"
    )
