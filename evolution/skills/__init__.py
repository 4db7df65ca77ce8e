"""Skills: named procedures a version carries, retrieved and injected by the gateway
(`retrieval`), distilled from a window's trajectories and users' guidance (`operator`)."""

from evolution.skills.retrieval import ScoredSkill, SkillIndex, skill_block, skill_text

__all__ = ["ScoredSkill", "SkillIndex", "skill_block", "skill_text"]
