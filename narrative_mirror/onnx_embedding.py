"""The embedder on ONNX Runtime: the packaged MiniLM weights exported to ONNX once (cached in a
folder the caller names, keyed by the weights' hash), fp32 or int8 (dynamic, per-channel), with
the sentence-transformers pipeline's tokenizer, mean pooling and normalisation done here in numpy.
Nothing is downloaded: the export reads the same local weights the torch backend loads."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from functools import lru_cache
from pathlib import Path

import numpy as np

VARIANTS = ("fp32", "int8")
OPSET = 17


def weights_digest(model_dir: str) -> str:
    """The hash of the model's weights and tokenizer: an export is reused only for these bytes."""
    h = hashlib.sha256()
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        path = Path(model_dir) / name
        if path.exists():
            h.update(name.encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _max_length(model_dir: str) -> int:
    config = Path(model_dir) / "sentence_bert_config.json"
    return int(json.loads(config.read_text()).get("max_seq_length", 256)) if config.exists() else 256


def export(model_dir: str, cache: Path, variant: str) -> Path:
    """The ONNX file of ``variant`` for the weights in ``model_dir``, exported into ``cache`` when
    missing (written under a temporary name, then renamed: a crash leaves no half file)."""
    if variant not in VARIANTS:
        raise ValueError(f"ONNX variant {variant!r}: expected one of {', '.join(VARIANTS)}")
    folder = Path(cache) / weights_digest(model_dir)
    target = folder / f"{variant}.onnx"
    if target.exists():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    fp32 = folder / "fp32.onnx"
    if not fp32.exists():
        _export_fp32(model_dir, fp32)
    if variant == "int8":
        from onnxruntime.quantization import QuantType, quantize_dynamic

        tmp = folder / f"int8.{os.getpid()}.tmp.onnx"
        quantize_dynamic(str(fp32), str(tmp), per_channel=True, weight_type=QuantType.QInt8)
        os.replace(tmp, target)
    return target


def _export_fp32(model_dir: str, target: Path) -> None:
    import torch
    from transformers import AutoModel

    class LastHidden(torch.nn.Module):  # keyword arguments: the positional order differs across versions
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.inner(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    model = LastHidden(AutoModel.from_pretrained(model_dir, local_files_only=True).eval())
    sample = torch.ones((2, 8), dtype=torch.long)
    tmp = target.with_name(f"fp32.{os.getpid()}.tmp.onnx")
    axes = {0: "batch", 1: "tokens"}
    with torch.no_grad():
        torch.onnx.export(
            model,
            (sample, sample, torch.zeros_like(sample)),
            str(tmp),
            dynamo=False,
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["last_hidden_state"],
            opset_version=OPSET,
            dynamic_axes={"input_ids": axes, "attention_mask": axes, "token_type_ids": axes, "last_hidden_state": axes},
        )
    os.replace(tmp, target)


def tokenizer(model_dir: str):
    """The model's tokenizer as sentence-transformers runs it: truncated, padded per batch."""
    from tokenizers import Tokenizer

    out = Tokenizer.from_file(str(Path(model_dir) / "tokenizer.json"))
    out.enable_truncation(_max_length(model_dir))
    out.enable_padding(pad_id=0, pad_token="[PAD]")
    return out


def model_inputs(tokenizer, texts: list[str]) -> dict[str, np.ndarray]:
    encodings = tokenizer.encode_batch(texts)
    ids = np.array([e.ids for e in encodings], dtype=np.int64)
    mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}


CALIBRATIONS = ("minmax",)  # histogram calibrations need one padded shape and GBs of activations


def export_static(
    model_dir: str, cache: Path, texts: list[str], calibration: str = "minmax", batch_size: int = 16
) -> Path:
    """The int8 model with static activation ranges measured on ``texts`` (QDQ, per-channel
    weights), exported into ``cache`` when missing; its name carries the calibration and the
    texts' hash, so other texts give another file."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    if calibration not in CALIBRATIONS:
        raise ValueError(f"ONNX calibration {calibration!r}: expected one of {', '.join(CALIBRATIONS)}")
    if not texts:
        raise ValueError("ONNX static int8: no calibration texts")
    digest = hashlib.sha256("\x00".join(texts).encode()).hexdigest()[:12]
    target = export(model_dir, cache, "fp32").with_name(f"int8-static-{calibration}-{digest}.onnx")
    if target.exists():
        return target
    words = tokenizer(model_dir)
    ordered = sorted(texts, key=len)  # batches of like lengths: little padding in the ranges

    class Batches(CalibrationDataReader):
        def __init__(self):
            self.batches = iter(range(0, len(ordered), batch_size))

        def get_next(self):
            start = next(self.batches, None)
            return None if start is None else model_inputs(words, ordered[start : start + batch_size])

    method = {"minmax": CalibrationMethod.MinMax}[calibration]
    fp32 = target.with_name("fp32.onnx")
    tmp = target.with_name(f"{target.stem}.{os.getpid()}.tmp.onnx")
    quantize_static(
        str(fp32),
        str(tmp),
        Batches(),
        quant_format=QuantFormat.QDQ,
        per_channel=True,
        activation_type=QuantType.QUInt8,  # asymmetric: GELU outputs are nearly all positive
        weight_type=QuantType.QInt8,
        # Only the weight products (most of the compute); norms, softmax and the attention
        # products of two activations stay fp32: quantizing every MatMul drifted the vectors to
        # cosine .84 with torch's (.92 this way, on RealTalk text).
        op_types_to_quantize=["MatMul", "Gemm"],
        nodes_to_exclude=_activation_products(fp32),
        calibrate_method=method,
    )
    os.replace(tmp, target)
    return target


def _activation_products(path: Path) -> list[str]:
    """The MatMul nodes of ``path`` whose inputs are both activations (no weight initializer)."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    weights = {init.name for init in graph.initializer}
    constants = {out for node in graph.node if node.op_type == "Constant" for out in node.output}
    return [
        node.name
        for node in graph.node
        if node.op_type == "MatMul" and not any(i in weights or i in constants for i in node.input)
    ]


class OnnxEncoder:
    """Encodes texts with one exported model; a session per thread count (ONNX Runtime fixes its
    intra-op threads when the session is made), without spin-waiting threads (they steal the
    cores a busy machine has left)."""

    def __init__(self, model_dir: str, onnx_path: Path):
        self.path = onnx_path
        self.tokenizer = tokenizer(model_dir)
        self._sessions: dict[int, object] = {}
        self._lock = threading.Lock()

    def session(self, threads: int):
        with self._lock:
            if threads not in self._sessions:
                import onnxruntime as ort

                options = ort.SessionOptions()
                options.intra_op_num_threads = threads
                options.inter_op_num_threads = 1
                options.add_session_config_entry("session.intra_op.allow_spinning", "0")
                self._sessions[threads] = ort.InferenceSession(
                    str(self.path), options, providers=["CPUExecutionProvider"]
                )
            return self._sessions[threads]

    def encode(self, texts: list[str], threads: int = 1) -> np.ndarray:
        inputs = model_inputs(self.tokenizer, texts)
        hidden = self.session(threads).run(None, inputs)[0]
        weights = inputs["attention_mask"][..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)


@lru_cache(maxsize=4)
def encoder(model_dir: str, cache: str, variant: str) -> OnnxEncoder:
    """The process's encoder of ``variant`` (exported on first use)."""
    return OnnxEncoder(model_dir, export(model_dir, Path(cache), variant))
