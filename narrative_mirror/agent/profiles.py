"""Execution profiles: how much the agent may search, fetch and call before it must answer.

Budgets and corrective thresholds follow the agentic-RAG design: ``fast`` for an
instant answer, ``balanced`` (default) for normal questions, ``deep`` before important decisions.
"""

from __future__ import annotations

from dataclasses import dataclass

from narrative_mirror.agent.config import agent_config, module_settings


@dataclass(frozen=True)
class Profile:
    name: str
    max_rounds: int  # retrieval rounds, the first search included
    first_search: int  # hits asked of the first search (and of each variant search)
    max_evidence_fetches: int  # evidence messages pulled by id for an answer (ask)
    max_calls: int  # every tool call: searches, fetches and LLM calls
    rewrite_candidates: int  # query variants searched beside the question, per round
    min_top5_relevance: float  # coverage: mean grade of the 5 best evidence items
    min_must_have_hits: int  # coverage: evidence items that match the question's must-have facets
    deadline_s: float = 20.0  # wall time of one ask, LLM calls and retries included; then the offline answer
    story_blocks: int | None = None  # L1 blocks an arc pulls whole; None: max_evidence_fetches

    @property
    def arc_blocks(self) -> int:
        return self.max_evidence_fetches if self.story_blocks is None else self.story_blocks

    def __post_init__(self) -> None:
        for name in ("max_rounds", "first_search", "max_evidence_fetches", "max_calls", "story_blocks"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(f"profile {self.name!r}: {name} must be >= 1, got {getattr(self, name)}")
        if self.rewrite_candidates < 0 or self.min_must_have_hits < 0:
            raise ValueError(f"profile {self.name!r}: rewrite_candidates and min_must_have_hits must be >= 0")
        if not 0.0 <= self.min_top5_relevance <= 1.0:
            raise ValueError(f"profile {self.name!r}: min_top5_relevance must be in [0, 1]")
        if not self.deadline_s > 0:
            raise ValueError(f"profile {self.name!r}: deadline_s must be > 0")


def load_profiles(config: dict) -> dict[str, Profile]:
    """The profiles of agent.toml's ``[profiles.<name>]`` tables, in file order."""
    return {name: Profile(name, **values) for name, values in config["profiles"].items()}


_loaded: tuple[dict, dict[str, Profile]] | None = None


def profiles() -> dict[str, Profile]:
    """The profiles of agent.toml as in effect now (the same objects while the file is unchanged).
    Deadlines (the agentic-RAG design leaves the latency SLO to operations): an instant answer in
    chat, a normal question, an investigation."""
    global _loaded
    config = agent_config()
    if _loaded is None or _loaded[0] is not config:
        _loaded = (config, load_profiles(config))
    return _loaded[1]


__getattr__ = module_settings(__name__, {"PROFILES": profiles})
DEFAULT_PROFILE = "balanced"


def get_profile(profile: str | Profile) -> Profile:
    """A profile by name (or a custom ``Profile`` passed through)."""
    if isinstance(profile, Profile):
        return profile
    try:
        return profiles()[profile]
    except KeyError:
        raise ValueError(f"unknown profile {profile!r}; known: {sorted(profiles())}") from None
