"""A serving process hands the memory its searches freed back to the system every TRIM_EVERY
searches (its RSS otherwise climbs with the allocator's free lists: benchmarks/api_load.py)."""

from __future__ import annotations

import itertools

from memory_api_chat import CHAT, build_retriever

from narrative_mirror.retrieval import ram_use


def test_every_trim_every_th_search_of_a_real_index_hands_freed_memory_back(monkeypatch, tmp_path, embedder):
    trims = []
    monkeypatch.setattr(ram_use, "release_free_memory", lambda: trims.append(1))
    monkeypatch.setattr(ram_use, "_searches", itertools.count(1))
    retriever = build_retriever(tmp_path / "lancedb", embedder)
    for _ in range(ram_use.TRIM_EVERY - 1):
        ram_use.after_search()
    assert trims == []
    retriever.search(CHAT, "rye bread", k=3)  # the TRIM_EVERY-th
    assert trims == [1]
    retriever.search_many(CHAT, ["bakery", "marathon"], k=3)
    assert trims == [1]
    for _ in range(ram_use.TRIM_EVERY - 1):
        ram_use.after_search()
    assert trims == [1, 1]
