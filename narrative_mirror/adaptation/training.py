"""Trains the top layers of a sentence embedder on unlabeled message pairs with in-batch
negatives (MultipleNegativesRanking: each message must pick its answer among the batch's).

Affordable on a CPU: the frozen lower layers run once per distinct text (their outputs are kept),
batches hold texts of similar length (little padding), the pairs are a bounded sample, and
training stops when the loss on a held-out slice of pairs stops falling."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class AdaptationSettings:
    """embedding.toml ``[adaptation]``'s training settings."""

    top_layers: int = 2  # the layers trained; the ones below stay as shipped
    pair_cap: int = 4000  # pairs sampled at most (the cost bound)
    epochs: int = 2  # more overfits (issue 31's measurement)
    batch_size: int = 32  # in-batch negatives: batch_size - 1 per pair
    learning_rate: float = 3e-5
    scale: float = 20.0  # cosine -> logit
    held_out: float = 0.1  # share of pairs for early stopping
    patience: int = 1  # epochs without a better held-out loss before stopping
    seed: int = 0
    threads: int = 1  # torch intra-op threads on a CPU (two spin-wait on a busy 2-core machine)

    @classmethod
    def from_config(cls, section: dict) -> AdaptationSettings:
        known = {k: section[k] for k in asdict(cls()) if k in section}
        return cls(**known)

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class TrainingReport:
    """What a training run did: pairs used, epochs run, held-out loss per epoch, seconds."""

    train_pairs: int
    held_out_pairs: int
    texts: int
    epochs_run: int
    best_epoch: int
    held_out_loss: list[float]
    lower_seconds: float
    train_seconds: float

    def as_dict(self) -> dict:
        return asdict(self)


def _bert(model):
    return model[0].auto_model


def _mask(bert, attention_mask, states):
    from transformers.masking_utils import create_bidirectional_mask

    return create_bidirectional_mask(config=bert.config, inputs_embeds=states, attention_mask=attention_mask)


def _layer_out(output):
    return output[0] if isinstance(output, tuple) else output


class LowerStates:
    """The frozen lower layers' output of each distinct text, computed once (float32, CPU)."""

    def __init__(self, model, split: int, device: str, batch_size: int = 64):
        self.model, self.split, self.device, self.batch_size = model, split, device, batch_size
        self.states: dict[str, np.ndarray] = {}

    def tokenize(self, texts: Sequence[str]):
        tokenizer = self.model[0].tokenizer
        return tokenizer(list(texts), padding=True, truncation=True, max_length=self.model.max_seq_length,
                         return_tensors="pt")

    def add(self, texts: Sequence[str]) -> None:
        import torch

        bert = _bert(self.model)
        todo = sorted({t for t in texts if t not in self.states}, key=len)
        with torch.inference_mode():
            for start in range(0, len(todo), self.batch_size):
                batch = todo[start: start + self.batch_size]
                features = self.tokenize(batch).to(self.device)
                hidden = bert.embeddings(input_ids=features["input_ids"], token_type_ids=features["token_type_ids"])
                mask = _mask(bert, features["attention_mask"], hidden)
                for layer in bert.encoder.layer[: self.split]:
                    hidden = _layer_out(layer(hidden, attention_mask=mask))
                lengths = features["attention_mask"].sum(dim=1).tolist()
                for text, row, n in zip(batch, hidden.float().cpu().numpy(), lengths):
                    self.states[text] = row[:n].copy()

    def batch(self, texts: Sequence[str]):
        """(padded states, attention mask) tensors of ``texts`` on the device."""
        import torch

        longest = max(len(self.states[t]) for t in texts)
        dim = next(iter(self.states.values())).shape[1]
        states = np.zeros((len(texts), longest, dim), dtype=np.float32)
        mask = np.zeros((len(texts), longest), dtype=np.int64)
        for i, text in enumerate(texts):
            row = self.states[text]
            states[i, : len(row)], mask[i, : len(row)] = row, 1
        return torch.from_numpy(states).to(self.device), torch.from_numpy(mask).to(self.device)


def upper_vectors(model, split: int, states, mask):
    """Normalized sentence vectors from lower-layer ``states``: the top layers, mean pooling, L2
    (what the shipped MiniLM's pooling and normalization modules do)."""
    import torch

    bert = _bert(model)
    hidden = states
    extended = _mask(bert, mask, hidden)
    for layer in bert.encoder.layer[split:]:
        hidden = _layer_out(layer(hidden, attention_mask=extended))
    weights = mask.unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, p=2, dim=1)


def _batches(pairs: Sequence[tuple[str, str]], size: int, lengths: dict[str, int], rng: random.Random) -> list[list[int]]:
    """Length-bucketed batches of pair indexes (similar lengths together), in random order. A
    batch never holds one text twice (a duplicate would be its own false negative): a pair that
    would repeat one waits for the next batch."""
    remaining = sorted(range(len(pairs)), key=lambda i: (lengths[pairs[i][0]] + lengths[pairs[i][1]], rng.random()))
    batches = []
    while remaining:
        current, seen, rest = [], set(), []
        for i in remaining:
            first, second = pairs[i]
            if len(current) < size and first not in seen and second not in seen:
                current.append(i)
                seen.update((first, second))
            else:
                rest.append(i)
        if len(current) > 1:
            batches.append(current)
        remaining = rest if len(current) > 1 else []
    rng.shuffle(batches)
    return batches


def _loss(model, split, lower: LowerStates, pairs, indexes, scale):
    import torch

    anchors = upper_vectors(model, split, *lower.batch([pairs[i][0] for i in indexes]))
    answers = upper_vectors(model, split, *lower.batch([pairs[i][1] for i in indexes]))
    logits = scale * anchors @ answers.T
    target = torch.arange(len(indexes), device=logits.device)
    # both directions: a message picks its answer, an answer picks its message
    return (torch.nn.functional.cross_entropy(logits, target) + torch.nn.functional.cross_entropy(logits.T, target)) / 2


def train_top_layers(model, pairs: Sequence[tuple[str, str]], settings: AdaptationSettings, device: str = "cpu",
                     log: Callable[[str], None] | None = None) -> tuple[dict, TrainingReport]:
    """Train ``model``'s (a SentenceTransformer, changed in place) top ``settings.top_layers``
    layers on ``pairs``; returns the best held-out epoch's state dict of those layers (keys as in
    the BertModel, ``encoder.layer.N.…``) and the report."""
    import torch

    bert = _bert(model)
    split = len(bert.encoder.layer) - settings.top_layers
    rng = random.Random(settings.seed)
    pairs = list(pairs)
    rng.shuffle(pairs)
    held = max(settings.batch_size, int(len(pairs) * settings.held_out)) if len(pairs) >= 4 * settings.batch_size else 0
    held_out, train = pairs[:held], pairs[held:]
    threads = torch.get_num_threads()
    if device == "cpu":
        torch.set_num_threads(max(1, settings.threads))
    torch.manual_seed(settings.seed)
    try:
        started = time.perf_counter()
        lower = LowerStates(model, split, device)
        bert.eval()
        lower.add([t for pair in pairs for t in pair])
        lower_seconds = time.perf_counter() - started
        lengths = {t: len(s) for t, s in lower.states.items()}
        for name, param in bert.named_parameters():
            param.requires_grad = name.startswith(tuple(f"encoder.layer.{i}." for i in range(split, len(bert.encoder.layer))))
        trainable = [p for p in bert.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(trainable, lr=settings.learning_rate)
        held_batches = _batches(held_out, settings.batch_size, lengths, random.Random(settings.seed))

        def held_out_loss() -> float:
            if not held_batches:
                return float("nan")
            bert.eval()
            with torch.no_grad():
                losses = [float(_loss(model, split, lower, held_out, b, settings.scale)) * len(b) for b in held_batches]
            return sum(losses) / sum(map(len, held_batches))

        def top_state() -> dict:
            return {k: v.detach().cpu().clone() for k, v in bert.state_dict().items()
                    if k.startswith(tuple(f"encoder.layer.{i}." for i in range(split, len(bert.encoder.layer))))}

        losses = [held_out_loss()]
        best_state, best_epoch, epochs_run = top_state(), 0, 0
        for epoch in range(1, settings.epochs + 1):
            bert.train()
            for batch in _batches(train, settings.batch_size, lengths, rng):
                optimizer.zero_grad()
                _loss(model, split, lower, train, batch, settings.scale).backward()
                optimizer.step()
            epochs_run = epoch
            losses.append(held_out_loss())
            if log:
                log(f"adaptation epoch {epoch}: held-out loss {losses[-1]:.4f} (before training {losses[0]:.4f})")
            if not held_batches or losses[-1] < min(losses[:-1]):
                best_state, best_epoch = top_state(), epoch
            elif epoch - best_epoch >= settings.patience:
                break
        bert.eval()
        for param in bert.parameters():
            param.requires_grad = True
        bert.load_state_dict(best_state, strict=False)
        report = TrainingReport(len(train), len(held_out), len(lower.states), epochs_run, best_epoch,
                                [round(x, 5) for x in losses], round(lower_seconds, 3),
                                round(time.perf_counter() - started, 3))
        return best_state, report
    finally:
        torch.set_num_threads(threads)
