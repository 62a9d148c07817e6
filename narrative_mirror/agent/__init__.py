"""The question-answering agent (LangGraph), its profiles, narrative (arc) mode and output contract."""

from narrative_mirror.agent.contract import AgentAnswer, ArcAnswer, DebugTrace, EvidenceItem, Phase, RankedId
from narrative_mirror.agent.profiles import DEFAULT_PROFILE, PROFILES, Profile, get_profile

__all__ = [
    "AgentAnswer", "ArcAnswer", "DebugTrace", "EvidenceItem", "Phase", "RankedId",
    "DEFAULT_PROFILE", "PROFILES", "Profile", "get_profile",
]
