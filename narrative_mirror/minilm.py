"""The packaged sentence model (a BERT encoder, mean pooling, L2 normalisation) in plain torch.

Importing sentence-transformers costs 7-10 s per process (it pulls transformers' modeling code and
scikit-learn); this module needs only torch, safetensors and tokenizers (~2.5 s). Parameter names
are those of transformers' ``BertModel``, so a state dict of ``SentenceTransformer[0].auto_model``
(an adaptation's layers) loads into ``SentenceEncoder.bert`` unchanged. Training, which needs the
full sentence-transformers model, still loads it (narrative_mirror/embedding.py ``fresh_model``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional

from narrative_mirror.onnx_embedding import model_inputs, tokenizer


class _Embeddings(nn.Module):
    def __init__(self, config: dict):
        super().__init__()
        hidden = config["hidden_size"]
        self.word_embeddings = nn.Embedding(config["vocab_size"], hidden, padding_idx=config.get("pad_token_id", 0))
        self.position_embeddings = nn.Embedding(config["max_position_embeddings"], hidden)
        self.token_type_embeddings = nn.Embedding(config["type_vocab_size"], hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=config["layer_norm_eps"])

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        summed = (
            self.word_embeddings(input_ids)
            + self.token_type_embeddings(token_type_ids)
            + self.position_embeddings(positions)[None]
        )
        return self.LayerNorm(summed)


class _SelfAttention(nn.Module):
    def __init__(self, config: dict):
        super().__init__()
        hidden = config["hidden_size"]
        self.heads = config["num_attention_heads"]
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)

    def forward(self, states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        batch, length, hidden = states.shape

        def split(x):  # (batch, heads, tokens, head size)
            return x.view(batch, length, self.heads, hidden // self.heads).transpose(1, 2)

        context = functional.scaled_dot_product_attention(
            split(self.query(states)), split(self.key(states)), split(self.value(states)), attn_mask=mask
        )
        return context.transpose(1, 2).reshape(batch, length, hidden)


class _DenseNorm(nn.Module):
    """A projection added to the block's input, then layer-normed (BERT's ``*Output`` modules)."""

    def __init__(self, inner: int, hidden: int, eps: float):
        super().__init__()
        self.dense = nn.Linear(inner, hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=eps)

    def forward(self, states: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dense(states) + residual)


class _Attention(nn.Module):
    def __init__(self, config: dict):
        super().__init__()
        self.self = _SelfAttention(config)
        self.output = _DenseNorm(config["hidden_size"], config["hidden_size"], config["layer_norm_eps"])

    def forward(self, states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.output(self.self(states, mask), states)


class _Intermediate(nn.Module):
    def __init__(self, config: dict):
        super().__init__()
        if config.get("hidden_act", "gelu") != "gelu":
            raise ValueError(f"model config: hidden_act {config['hidden_act']!r} is not supported (only gelu)")
        self.dense = nn.Linear(config["hidden_size"], config["intermediate_size"])

    def forward(self, states: torch.Tensor) -> torch.Tensor:
        return functional.gelu(self.dense(states))


class _Layer(nn.Module):
    def __init__(self, config: dict):
        super().__init__()
        self.attention = _Attention(config)
        self.intermediate = _Intermediate(config)
        self.output = _DenseNorm(config["intermediate_size"], config["hidden_size"], config["layer_norm_eps"])

    def forward(self, states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        attended = self.attention(states, mask)
        return self.output(self.intermediate(attended), attended)


class _Encoder(nn.Module):
    def __init__(self, config: dict):
        super().__init__()
        self.layer = nn.ModuleList(_Layer(config) for _ in range(config["num_hidden_layers"]))

    def forward(self, states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        for layer in self.layer:
            states = layer(states, mask)
        return states


class _Pooler(nn.Module):
    """Unused by sentence embeddings; kept so the weights file loads strictly."""

    def __init__(self, config: dict):
        super().__init__()
        self.dense = nn.Linear(config["hidden_size"], config["hidden_size"])


class Bert(nn.Module):
    """BERT's encoder returning the last hidden states (inference only: no dropout)."""

    def __init__(self, config: dict):
        super().__init__()
        self.embeddings = _Embeddings(config)
        self.encoder = _Encoder(config)
        self.pooler = _Pooler(config)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor):
        # Padding keys are left out of every query's attention (True = attend).
        mask = attention_mask.bool()[:, None, None, :]
        return self.encoder(self.embeddings(input_ids, token_type_ids), mask)


def _check_mean_pooling(model_dir: Path) -> None:
    config_path = model_dir / "1_Pooling" / "config.json"
    if not config_path.exists():
        return
    pooling = json.loads(config_path.read_text(encoding="utf-8"))
    others = [k for k, v in pooling.items() if k.startswith("pooling_mode_") and v and k != "pooling_mode_mean_tokens"]
    if others or not pooling.get("pooling_mode_mean_tokens", True):
        raise ValueError(f"{config_path}: only mean pooling is supported, found {others or 'no mean pooling'}")


class SentenceEncoder:
    """The model in ``model_dir`` (config.json, model.safetensors, tokenizer.json) on ``device``:
    texts in, L2-normalised float32 vectors out, as ``SentenceTransformer.encode`` gives them."""

    def __init__(self, model_dir: str, device: str = "cpu"):
        from safetensors.torch import load_file

        folder = Path(model_dir)
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        _check_mean_pooling(folder)
        self.dimension = int(config["hidden_size"])
        self.device = device
        self.tokenizer = tokenizer(model_dir)
        self.bert = Bert(config)
        state = load_file(str(folder / "model.safetensors"))
        state.pop("embeddings.position_ids", None)  # a buffer older checkpoints saved; positions are computed
        self.bert.load_state_dict(state)
        self.bert.eval().to(device)

    def _forward(self, texts: list[str]) -> torch.Tensor:
        inputs = {k: torch.from_numpy(v).to(self.device) for k, v in model_inputs(self.tokenizer, texts).items()}
        hidden = self.bert(**inputs)
        weights = inputs["attention_mask"][..., None].to(hidden.dtype)
        pooled = (hidden * weights).sum(dim=1) / torch.clamp(weights.sum(dim=1), min=1e-9)
        return functional.normalize(pooled, p=2, dim=1)

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """Vectors of ``texts`` in their order, in batches of ``batch_size`` texts of like length
        (longest first, as sentence-transformers batches them: little padding)."""
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        order = np.argsort([-len(t) for t in texts], kind="stable")
        with torch.inference_mode():
            for start in range(0, len(texts), batch_size):
                rows = order[start : start + batch_size]
                out[rows] = self._forward([texts[i] for i in rows]).float().cpu().numpy()
        return out
