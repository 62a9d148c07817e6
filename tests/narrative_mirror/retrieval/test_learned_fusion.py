"""Learned fusion: the listwise loss against hand values and finite differences, fitting on a
toy problem with a known answer, config validation, the neighbour feature, and the benchmarks'
held-out fitting (train_fusion.TrainingPools)."""

import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import check_grad

from narrative_mirror import settings
from narrative_mirror.retrieval.learned_fusion import (
    FEATURES,
    LearnedFusion,
    fit_listwise,
    inputs_fingerprint,
    listwise_loss,
    neighbour_max,
)


def test_loss_matches_hand_computed_softmax_cross_entropy():
    # One question, scores 0 and log 3: softmax .25 / .75; the gold is the first -> -log .25.
    z = np.array([[0.0], [np.log(3.0)]])
    loss, _ = listwise_loss(np.array([1.0]), z, np.array([1.0, 0.0]), [np.array([0, 1])], l2=0.0)
    assert loss == pytest.approx(np.log(4.0))
    # Two gold candidates share the target: -(.5 log .25 + .5 log .75).
    loss, _ = listwise_loss(np.array([1.0]), z, np.array([1.0, 1.0]), [np.array([0, 1])], l2=0.5)
    assert loss == pytest.approx(-(0.5 * np.log(0.25) + 0.5 * np.log(0.75)) + 0.5)


def test_gradient_matches_finite_differences():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(30, 4))
    labels = (rng.random(30) < 0.3).astype(float)
    labels[[0, 10, 20]] = 1.0
    groups = [np.arange(0, 10), np.arange(10, 20), np.arange(20, 30)]

    def loss(w):
        return listwise_loss(w, z, labels, groups, 0.01)[0]

    def grad(w):
        return listwise_loss(w, z, labels, groups, 0.01)[1]

    assert check_grad(loss, grad, rng.normal(size=4)) < 1e-5


def test_fit_finds_the_informative_feature():
    # 40 questions of 20 candidates; the gold has feature "signal" 1, the rest 0; "noise" is random.
    rng = np.random.default_rng(1)
    n_q, n_c = 40, 20
    signal = np.zeros(n_q * n_c)
    signal[::n_c] = 1.0
    x = np.column_stack([rng.normal(size=n_q * n_c), signal])
    labels = signal.copy()
    question = np.repeat(np.arange(n_q), n_c)
    question[-n_c:] = n_q - 1
    labels[-n_c:] = 0.0  # a question without gold in its pool is left out, not an error
    model = fit_listwise(x, labels, question, ["cosine", "speaker_named"], l2=1e-3)
    assert model.features == ("cosine", "speaker_named")
    assert abs(model.weights[1]) > 5 * abs(model.weights[0]) and model.weights[1] > 0
    scores = model.score(x).reshape(n_q, n_c)
    assert (scores.argmax(axis=1) == 0).all()
    with pytest.raises(ValueError, match="no question has a gold candidate"):
        fit_listwise(x, np.zeros_like(labels), question, ["cosine", "speaker_named"])
    with pytest.raises(ValueError, match="do not match"):
        fit_listwise(x, labels, question, ["cosine"])


def test_config_round_trip_and_errors():
    model = LearnedFusion(("cosine", "tier"), np.array([0.5, 1.0]), np.array([2.0, 1.0]), np.array([1.0, -0.5]))
    again = LearnedFusion.from_config(model.to_config())
    x = np.array([[1.5, 3.0], [0.5, 0.0]])
    assert again.score(x).tolist() == pytest.approx([0.5 - 1.0, 0.0 + 0.5])
    with pytest.raises(ValueError, match="missing 'weights'"):
        LearnedFusion.from_config({"features": ["cosine"], "mean": [0], "scale": [1]})
    with pytest.raises(ValueError, match=r"unknown features \['shoe_size'\]"):
        LearnedFusion.from_config({"features": ["shoe_size"], "mean": [0], "scale": [1], "weights": [1]})
    with pytest.raises(ValueError, match=r"\[learned\].weights: 2 values for 1 features"):
        LearnedFusion.from_config({"features": ["cosine"], "mean": [0], "scale": [1], "weights": [1, 2]})
    with pytest.raises(ValueError, match="scale: values must be > 0"):
        LearnedFusion.from_config({"features": ["cosine"], "mean": [0], "scale": [0], "weights": [1]})


def test_neighbour_max_stays_inside_the_session():
    values = np.array([1.0, 5.0, 2.0, 9.0, 3.0])
    sessions = np.array([1, 1, 1, 2, 2])
    assert neighbour_max(values, sessions, 1).tolist() == [5.0, 2.0, 5.0, 3.0, 9.0]
    assert neighbour_max(values, sessions, 2).tolist() == [2.0, 0.0, 1.0, 0.0, 0.0]
    assert neighbour_max(values, sessions, 5).tolist() == [0.0] * 5


def test_the_shipped_model_was_fitted_on_todays_inputs():
    config = settings.load_config("retrieval")
    assert config["learned"]["inputs"] == inputs_fingerprint(config), (
        "the learned fusion is stale: its inputs (retrieval lists, features, embedding or layer settings) changed "
        "since it was fitted; retrain with .venv/bin/python benchmarks/train_fusion.py --write"
    )


def test_the_fingerprint_changes_with_the_hybrid_lists():
    config = settings.load_config("retrieval")
    changed = {**config, "hybrid": {**config["hybrid"], "w_bm25": config["hybrid"].get("w_bm25", 1.0) + 0.5}}
    assert inputs_fingerprint(changed) != inputs_fingerprint(config)
    assert inputs_fingerprint({**config, "cache": {"max_mb": 1}}) == inputs_fingerprint(config)


def test_training_pools_fit_held_out_and_on_a_subset_of_features():
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
    from train_fusion import TrainingPools

    # 3 chats x 10 questions of 5 candidates; the gold (first candidate) has speaker_named 1.
    rng = np.random.default_rng(2)
    names = list(FEATURES)
    pools, golds = [], []
    for q in range(30):
        x = rng.normal(size=(5, len(names)))
        x[:, names.index("speaker_named")] = [1, 0, 0, 0, 0]
        pools.append(([f"q{q}:{i}" for i in range(5)], x))
        golds.append([f"q{q}:0"])
    data = TrainingPools(pools, golds, [1] * 30, [q // 10 for q in range(30)])
    held_out = data.leave_one_chat_out(1e-3)
    assert len(held_out) == 3 and all(m.features == tuple(names) for m in held_out)
    subset = ["cosine", "speaker_named"]
    model = data.fit(1e-3, without_chat=0, features=subset)
    assert model.features == tuple(subset) and model.weights.shape == (2,) and model.weights[1] > 0
    assert data.leave_one_chat_out(1e-3, features=subset)[0].weights.tolist() == model.weights.tolist()
