"""Training data from every signal a training export holds, one module per kind.

Every builder reads only what `registry.training_records` yields (the registry's
training export: eligible events of real user traffic, never shadow or evaluation traffic,
never `debug_only` or `audit_only` data), or prompts made from it:

- `preferences`: DPO pairs, (the user's correction or the rewarded retry) over (the answer
  it corrected);
- `teacher`: SFT targets, a failed step replayed with a teacher (an OpenAI-compatible
  model), kept where the verifier accepts the answer;
- `distillation`: on-policy distillation, the student's own samples with each token's
  advantage the teacher's logprob minus the student's (a teacher sharing its tokenizer);
- `judge`: a relative judge, a model scoring a group of answers side by side where explicit
  rewards are sparse, with its agreement with explicit rewards, never replacing one.
"""

from evolution.rl.data.distillation import distillation_groups
from evolution.rl.data.judge import RelativeJudge, agreement, with_explicit
from evolution.rl.data.preferences import PreferencePair, correction_pairs
from evolution.rl.data.teacher import OpenAITeacher, Teacher, teacher_targets
from evolution.rl.data.text import call_text, completion_text

__all__ = [
    "OpenAITeacher",
    "PreferencePair",
    "RelativeJudge",
    "Teacher",
    "agreement",
    "call_text",
    "completion_text",
    "correction_pairs",
    "distillation_groups",
    "teacher_targets",
    "with_explicit",
]
