"""The question-answering agent (LangGraph), its profiles, narrative (arc) mode and output contract."""

from narrative_mirror.agent.contract import AgentAnswer, ArcAnswer, DebugTrace, EvidenceItem, Phase, RankedId
from narrative_mirror.agent.profiles import DEFAULT_PROFILE, Profile, get_profile, profiles

__all__ = [
    "AgentAnswer",
    "ArcAnswer",
    "DebugTrace",
    "EvidenceItem",
    "Phase",
    "RankedId",
    "DEFAULT_PROFILE",
    "Profile",
    "get_profile",
    "profiles",
]
