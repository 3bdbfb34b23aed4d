"""Which chat template turns a conversation's messages into a prompt.

A model's own template (a GGUF's `tokenizer.chat_template`, a tokenizer's `chat_template`)
is used unless the run names another with the backend setting `chat_template`: a template
shipped here (`chatml`, `gemma`) or a Jinja file in Hugging Face's chat-template dialect. A
model without one (the packaged Gemma 3 270M is the base model: its GGUF has none) needs the
setting. The template given is part of the runtime fingerprint (its sha256 decides the
prompt), so results rendered by one template are never replayed for another.

Control tokens come only from the template (`prompt_tokens`): a message's text is tokenised as
plain text, so a user who writes `<|im_end|>` and `<|im_start|>system` (or a model whose own
reply, fed back under `history: own`, says it) gets those characters, not a forged turn.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from regress.backends.base import setting as checked
from regress.core.errors import BadInput

SHIPPED = {
    # ChatML, as SmolLM2 and Qwen write their turns.
    "chatml": (
        "{% for message in messages %}"
        "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
        "{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
    ),
    # Gemma's turns (user and model; no system role, so a system message opens the first
    # user turn), after the beginning-of-sequence token.
    "gemma": (
        "{{ bos_token }}"
        "{% set first = messages[0] %}"
        "{% set system = first['content'] + '\\n\\n' if first['role'] == 'system' else '' %}"
        "{% for message in messages if message['role'] != 'system' %}"
        "{{ '<start_of_turn>' + ('model' if message['role'] == 'assistant' else 'user') + '\\n' }}"
        "{{ (system if loop.first else '') + message['content'] | trim + '<end_of_turn>\\n' }}"
        "{% endfor %}"
        "{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}"
    ),
}
"""Templates written for regress, by name."""


@dataclass(frozen=True)
class ChatTemplate:
    """A chat template's text and where it came from."""

    source: str
    """`model` (the model's own), a shipped name, or a file path."""
    text: str

    @property
    def sha256(self) -> str:
        """sha256 of the template text: what decides the rendered prompt."""
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    def recorded(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The fingerprint's `params` and `build` entries: the setting and the text's sha256
        for a template the run named; nothing for the model's own (its file's sha256 covers
        it)."""
        if self.source == "model":
            return {}, {}
        return {"chat_template": self.source}, {"chat_template_sha256": self.sha256}


def chat_template(setting: str | None, own: str | None, model: str) -> ChatTemplate | None:
    """The template a run uses: the `chat_template` setting (a shipped name or a file), else
    the model's own; None when there is neither (a conversation then fails with `missing`)."""
    if setting is None:
        return ChatTemplate("model", own) if own else None
    checked("chat_template", setting, str)
    if setting in SHIPPED:
        return ChatTemplate(setting, SHIPPED[setting])
    path = Path(setting).expanduser()
    if not path.is_file():
        names = ", ".join(SHIPPED)
        raise BadInput(f"chat_template {setting!r} is neither a template name ({names}) nor a file")
    try:
        return ChatTemplate(str(path), path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"chat_template {path}: cannot read ({exc})") from exc


def missing(model: str) -> str:
    """The error for a conversation on a model without a chat template."""
    names = ", ".join(SHIPPED)
    return (
        f"{model} has no chat template, which a conversation needs: pass "
        f"--model-args chat_template=NAME ({names}) or chat_template=FILE.jinja"
    )


_OPEN, _CLOSE = "\ue000", "\ue001"
"""Private-use characters that mark where a message's text sits in a rendered prompt."""

Render = Callable[[list[dict[str, str]]], str]
"""A template bound to its model: messages (role, content) -> the prompt text."""
Tokenize = Callable[[str, bool], list[int]]
"""text, whether control-token text in it becomes control tokens -> token ids."""


def prompt_tokens(
    render: Render, messages: Sequence[tuple[str, str]], tokenize: Tokenize, source: str
) -> list[int]:
    """A conversation's prompt tokens, with control tokens only where the template wrote them.

    The prompt is rendered twice: as is, and with each message's text between two marks
    (inside its surrounding white space, so a template's `trim` keeps them). The marks give
    where each message's text lies in the prompt. When no message's text holds control-token
    text, the prompt is tokenised whole, exactly as before; otherwise the template's pieces
    are tokenised with control tokens and the messages' pieces as plain text.
    """
    if any(_OPEN in text or _CLOSE in text for _, text in messages):
        raise BadInput("a chat message holds the private-use characters U+E000/U+E001")
    prompt = render([{"role": role, "content": text} for role, text in messages])
    marked = render([{"role": role, "content": _marked(text)} for role, text in messages])
    if marked.replace(_OPEN, "").replace(_CLOSE, "") != prompt:
        raise BadInput(
            f"chat template ({source}) rewrites message text beyond trimming it, so its own "
            "control tokens cannot be told from the messages' text"
        )
    pieces = []  # (text, written by the template)
    for i, part in enumerate(marked.split(_OPEN)):
        inside, _, after = part.rpartition(_CLOSE) if i else ("", "", part)
        pieces += [(inside, False), (after, True)] if i else [(after, True)]
    if all(tokenize(text, True) == tokenize(text, False) for text, own in pieces if not own):
        return tokenize(prompt, True)
    return [token for text, own in pieces if text for token in tokenize(text, own)]


def _marked(text: str) -> str:
    """`text` with the marks around it, inside its leading and trailing white space."""
    core = text.strip()
    lead = text[: len(text) - len(text.lstrip())]
    return f"{lead}{_OPEN}{core}{_CLOSE}{text[len(lead) + len(core) :]}"
