"""The agent's harness as a DSPy program, and back.

A harness is instructions plus few-shot demos; a `dspy.Predict` is a signature's instructions
plus demos. The program maps one onto the other exactly: its adapter renders a call the way
the gateway's overlays render a request (instructions into the system message, demo messages
after it, then the agent's own conversation), so what DSPy optimises is what would be served,
and the raw completion is the answer (no DSPy field markers an agent's model never saw).

dspy is imported inside the functions that need it, so `import evolution` stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from atdp import ChatMessage, FewShotDemo, Harness

if TYPE_CHECKING:
    import dspy

__all__ = [
    "demo_of_example",
    "example_of_demo",
    "harness_adapter",
    "harness_of",
    "harness_program",
    "render_request",
]

_SYSTEM_ROLES = frozenset({"system", "developer"})


def _dspy() -> Any:
    try:
        import dspy
    except ImportError as error:  # an optional extra: say which one
        raise ImportError(
            "the harness operator needs DSPy; install it with `pip install 'evoplane[dspy]'`"
        ) from error
    return dspy


def render_request(
    instructions: str,
    demos: list[Any],
    messages: list[dict[str, Any]],
    template: str | None = None,
) -> list[dict[str, Any]]:
    """The messages the gateway would send upstream for `messages` under this harness.

    Mirrors the harness step of `runtime.version.overlays` for DSPy's demos (a conversation
    and its answer, not yet a version's `FewShotDemo`): instructions (through the template)
    merge into the agent's own system message or become one, demo messages follow, then the
    conversation.
    """
    instructions = instructions.strip()
    if template:
        instructions = template.replace("{instructions}", instructions)
    rest = list(messages)
    prefix: list[dict[str, Any]] = []
    first = rest[0] if rest else {}
    own_system = first.get("role") in _SYSTEM_ROLES
    if instructions and own_system and isinstance(first.get("content"), str):
        prefix = [{**first, "content": f"{instructions}\n\n{first['content']}"}]
        rest = rest[1:]
    elif instructions:
        prefix = [{"role": "system", "content": instructions}]
    elif own_system:
        prefix, rest = [first], rest[1:]
    shots = [message for demo in demos for message in demo_messages(demo)]
    return [*prefix, *shots, *rest]


def demo_messages(demo: Any) -> list[dict[str, Any]]:
    """A DSPy demo (conversation and answer) as the chat messages the gateway inserts."""
    messages = [m for m in demo["messages"] if m.get("role") not in _SYSTEM_ROLES]
    return [*messages, {"role": "assistant", "content": demo["answer"]}]


def harness_adapter(template: str | None = None) -> dspy.Adapter:
    """A DSPy adapter that speaks the gateway's harness format instead of DSPy's own."""
    dspy = _dspy()

    chat = dspy.ChatAdapter()

    def is_harness(signature) -> bool:  # noqa: ANN001 - a DSPy signature
        return set(signature.input_fields) == {"messages"} and set(signature.output_fields) == {
            "answer"
        }

    class HarnessAdapter(dspy.Adapter):
        """The harness program's calls in the gateway's layout; any other signature (an
        optimiser's own proposer modules) in DSPy's chat format."""

        def format(self, signature, demos, inputs):  # noqa: ANN001, ANN202 - DSPy's hook
            if not is_harness(signature):
                return chat.format(signature, demos, inputs)
            messages = inputs["messages"]
            return render_request(signature.instructions, list(demos), messages, template)

        def parse(self, signature, completion):  # noqa: ANN001, ANN202 - DSPy's hook
            if not is_harness(signature):
                return chat.parse(signature, completion)
            return {"answer": completion}

    return HarnessAdapter()


def harness_program(harness: Harness) -> dspy.Predict:
    """A `dspy.Predict` whose instructions and demos are the harness's."""
    dspy = _dspy()
    signature = dspy.Signature(
        "messages: list[dict[str, Any]] -> answer: str",
        # DSPy replaces empty instructions with a generated sentence the agent never had;
        # a blank one survives and is stripped when rendered.
        harness.instructions or " ",
    )
    program = dspy.Predict(signature)
    program.demos = [example_of_demo(demo) for demo in harness.demos]
    return program


def example_of_demo(demo: FewShotDemo) -> dspy.Example:
    """A harness demo as a DSPy example: the messages before the last assistant reply, and it."""
    dspy = _dspy()
    messages = [message.to_openai() for message in demo.messages]
    last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=None)
    if last is None:
        return dspy.Example(messages=messages, answer="").with_inputs("messages")
    answer = messages[last].get("content") or ""
    return dspy.Example(messages=messages[:last], answer=answer).with_inputs("messages")


def demo_of_example(example: Any) -> FewShotDemo:
    """A DSPy demo (labelled or bootstrapped) as the messages the gateway inserts."""
    return FewShotDemo(messages=[ChatMessage.from_openai(m) for m in demo_messages(example)])


def harness_of(program: dspy.Predict, parent: Harness) -> Harness:
    """The harness a (compiled) program stands for; the parent's template is kept."""
    return Harness(
        instructions=program.signature.instructions.strip(),
        template=parent.template,
        demos=[demo_of_example(demo) for demo in program.demos],
    )
