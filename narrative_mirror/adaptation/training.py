"""Trains the top layers of a sentence embedder on unlabeled message pairs with in-batch
negatives (MultipleNegativesRanking: each message must pick its answer among the batch's).

Affordable on a CPU: the frozen lower layers run once per distinct text (their outputs are kept),
batches hold texts of similar length (little padding), the pairs are a bounded sample, training
stops when the loss on a held-out slice of pairs stops falling, and it stops once its compute
(layer-tokens: lower layers, training steps, held-out checks) reaches ``cost_budget`` full encodes
of the home's messages."""

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
    pair_cap: int = 1000  # pairs sampled at most
    epochs: int = 2  # more overfits (measured on the train chats)
    batch_size: int = 32  # in-batch negatives: batch_size - 1 per pair
    learning_rate: float = 3e-5
    scale: float = 20.0  # cosine -> logit
    held_out: float = 0.1  # share of pairs for early stopping
    patience: int = 1  # epochs without a better held-out loss before stopping
    seed: int = 0
    threads: int = 1  # torch intra-op threads on a CPU (two spin-wait on a busy 2-core machine)
    cost_budget: float = 1.0  # compute at most this many full encodes of the home's messages (0: unbounded)
    pair_kinds: str = "turns,replies"  # adaptation/pairs.py's kinds, comma-separated

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
    steps: int = 0
    stopped_by: str = "epochs"  # epochs, held-out loss or budget
    cost: float = 0.0  # compute spent, in full encodes of the home's messages (0 when no budget was given)

    def as_dict(self) -> dict:
        return asdict(self)


def _bert(model):
    return model[0].auto_model


def _mask(bert, attention_mask, states):
    from transformers.masking_utils import create_bidirectional_mask

    return create_bidirectional_mask(config=bert.config, inputs_embeds=states, attention_mask=attention_mask)


def _layer_out(output):
    return output[0] if isinstance(output, tuple) else output


# A training step's compute per layer-token in forward passes: forward, backward (about twice a
# forward) and the optimizer; measured on a 2-core CPU, MiniLM top 2 layers: ~5.3.
TRAIN_STEP_FORWARDS = 6.0


def token_lengths(model, texts: Sequence[str]) -> list[int]:
    """Each text's token count as the model encodes it (truncated to its max_seq_length)."""
    tokenizer = model[0].tokenizer
    ids = tokenizer(list(texts), truncation=True, max_length=model.max_seq_length)["input_ids"]
    return [len(row) for row in ids]


def encode_cost(model, texts: Sequence[str]) -> float:
    """Compute of one full encode of ``texts``, in layer-tokens (every token through every layer)."""
    return float(sum(token_lengths(model, texts))) * len(_bert(model).encoder.layer)


class LowerStates:
    """The frozen lower layers' output of each distinct text, computed once (float32, CPU).
    ``layer_tokens`` counts the compute spent (padded tokens times layers run)."""

    def __init__(self, model, split: int, device: str, batch_size: int = 64):
        self.model, self.split, self.device, self.batch_size = model, split, device, batch_size
        self.states: dict[str, np.ndarray] = {}
        self.layer_tokens = 0

    def tokenize(self, texts: Sequence[str]):
        tokenizer = self.model[0].tokenizer
        return tokenizer(
            list(texts), padding=True, truncation=True, max_length=self.model.max_seq_length, return_tensors="pt"
        )

    def add(self, texts: Sequence[str]) -> None:
        import torch

        bert = _bert(self.model)
        todo = sorted({t for t in texts if t not in self.states}, key=len)
        with torch.inference_mode():
            for start in range(0, len(todo), self.batch_size):
                batch = todo[start : start + self.batch_size]
                features = self.tokenize(batch).to(self.device)
                hidden = bert.embeddings(input_ids=features["input_ids"], token_type_ids=features["token_type_ids"])
                self.layer_tokens += features["input_ids"].numel() * self.split
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


def _batches(
    pairs: Sequence[tuple[str, str]], size: int, lengths: dict[str, int], rng: random.Random
) -> list[list[int]]:
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


def _padded_tokens(pairs, indexes, lengths: dict[str, int]) -> int:
    """Tokens a batch runs through each top layer: anchors and answers, each padded to its longest."""
    return sum(len(indexes) * max(lengths[pairs[i][side]] for i in indexes) for side in (0, 1))


def _loss(model, split, lower: LowerStates, pairs, indexes, scale):
    """The in-batch loss of ``pairs[indexes]`` and the padded tokens it ran through the top layers."""
    import torch

    anchor_states, anchor_mask = lower.batch([pairs[i][0] for i in indexes])
    answer_states, answer_mask = lower.batch([pairs[i][1] for i in indexes])
    anchors = upper_vectors(model, split, anchor_states, anchor_mask)
    answers = upper_vectors(model, split, answer_states, answer_mask)
    logits = scale * anchors @ answers.T
    target = torch.arange(len(indexes), device=logits.device)
    # both directions: a message picks its answer, an answer picks its message
    loss = (torch.nn.functional.cross_entropy(logits, target) + torch.nn.functional.cross_entropy(logits.T, target)) / 2
    return loss, anchor_mask.numel() + answer_mask.numel()


def train_top_layers(
    model,
    pairs: Sequence[tuple[str, str]],
    settings: AdaptationSettings,
    device: str = "cpu",
    log: Callable[[str], None] | None = None,
    encode_layer_tokens: float = 0.0,
) -> tuple[dict, TrainingReport]:
    """Train ``model``'s (a SentenceTransformer, changed in place) top ``settings.top_layers``
    layers on ``pairs``; returns the best held-out epoch's state dict of those layers (keys as in
    the BertModel, ``encoder.layer.N.…``) and the report. ``encode_layer_tokens`` (``encode_cost``
    of the home's messages) bounds the compute to ``settings.cost_budget`` times it; 0: unbounded."""
    import torch

    bert = _bert(model)
    top = settings.top_layers
    split = len(bert.encoder.layer) - top
    budget = encode_layer_tokens * settings.cost_budget if settings.cost_budget > 0 else 0.0
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
        spent = float(lower.layer_tokens)
        lengths = {t: len(s) for t, s in lower.states.items()}
        for name, param in bert.named_parameters():
            param.requires_grad = name.startswith(
                tuple(f"encoder.layer.{i}." for i in range(split, len(bert.encoder.layer)))
            )
        trainable = [p for p in bert.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(trainable, lr=settings.learning_rate)
        held_batches = _batches(held_out, settings.batch_size, lengths, random.Random(settings.seed))

        def held_out_loss() -> float:
            nonlocal spent
            if not held_batches:
                return float("nan")
            bert.eval()
            total = 0.0
            with torch.no_grad():
                for b in held_batches:
                    loss, tokens = _loss(model, split, lower, held_out, b, settings.scale)
                    total += float(loss) * len(b)
                    spent += tokens * top
            return total / sum(map(len, held_batches))

        def top_state() -> dict:
            return {
                k: v.detach().cpu().clone()
                for k, v in bert.state_dict().items()
                if k.startswith(tuple(f"encoder.layer.{i}." for i in range(split, len(bert.encoder.layer))))
            }

        # What the last held-out check costs, reserved so the budget holds when training stops.
        check_cost = sum(_padded_tokens(held_out, b, lengths) for b in held_batches) * top
        losses = [held_out_loss()]
        best_state, best_epoch, epochs_run, steps, stopped_by = top_state(), 0, 0, 0, "epochs"
        for epoch in range(1, settings.epochs + 1):
            bert.train()
            for batch in _batches(train, settings.batch_size, lengths, rng):
                step_cost = _padded_tokens(train, batch, lengths) * top * TRAIN_STEP_FORWARDS
                if budget and spent + step_cost + check_cost > budget:
                    stopped_by = "budget"
                    break
                optimizer.zero_grad()
                loss, _ = _loss(model, split, lower, train, batch, settings.scale)
                loss.backward()
                optimizer.step()
                spent += step_cost
                steps += 1
            epochs_run = epoch
            losses.append(held_out_loss())
            if log:
                log(
                    f"adaptation epoch {epoch}: {steps} steps, held-out loss {losses[-1]:.4f} (before training "
                    f"{losses[0]:.4f})" + (f", {spent / encode_layer_tokens:.2f} encodes of compute" if budget else "")
                )
            if not held_batches or losses[-1] < min(losses[:-1]):
                best_state, best_epoch = top_state(), epoch
            elif epoch - best_epoch >= settings.patience:
                stopped_by = "held-out loss"
                break
            if stopped_by == "budget":
                break
        bert.eval()
        for param in bert.parameters():
            param.requires_grad = True
        bert.load_state_dict(best_state, strict=False)
        report = TrainingReport(
            len(train),
            len(held_out),
            len(lower.states),
            epochs_run,
            best_epoch,
            [round(x, 5) for x in losses],
            round(lower_seconds, 3),
            round(time.perf_counter() - started, 3),
            steps,
            stopped_by,
            round(spent / encode_layer_tokens, 3) if encode_layer_tokens else 0.0,
        )
        return best_state, report
    finally:
        torch.set_num_threads(threads)
