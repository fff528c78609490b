"""The prompt as a transformers model sees it (hf.py): rendered through its chat template
(with the template's keyword arguments), tokenized once and cached, with the index of the
last token of the user's own text (where the activation axis reads the prompt)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sago_core.errors import ConfigError

CACHED_PROMPTS = 100_000  # prompts kept encoded before the cache starts over


@dataclass(frozen=True)
class Encoded:
    ids: list[int]
    user_end: int  # index in ids of the last token of the user's own text


class PromptEncoder:
    """One model's prompts, rendered and tokenized the same way for every stage."""

    def __init__(self, tokenizer: Any, chat_template_kwargs: dict[str, Any], where: str) -> None:
        self.tokenizer = tokenizer
        self.chat_template_kwargs = chat_template_kwargs
        self.where = where
        self._encoded: dict[str, Encoded] = {}

    def render(self, prompt: str) -> str | None:
        """The prompt as text after the chat template (None: the model has none)."""
        if not self.tokenizer.chat_template:
            return None
        try:
            text = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": prompt}],
                add_generation_prompt=True,
                tokenize=False,
                **self.chat_template_kwargs,
            )
        except Exception as exc:  # a broken template is the model's
            raise ConfigError(
                f"model {self.where}: its chat template failed to render: "
                f"{type(exc).__name__}: {str(exc).strip()[:300]}"
            ) from exc
        return str(text)

    def encode(self, prompt: str) -> Encoded:
        cached = self._encoded.get(prompt)
        if cached is not None:
            return cached
        text = self.render(prompt)
        if text is None:
            ids = list(self.tokenizer(prompt, add_special_tokens=True)["input_ids"])
            encoded = Encoded(ids, len(ids) - 1)
        else:
            encoded = self._encode_rendered(text, prompt)
        if len(self._encoded) > CACHED_PROMPTS:
            self._encoded.clear()
        self._encoded[prompt] = encoded
        return encoded

    def _encode_rendered(self, text: str, prompt: str) -> Encoded:
        needle = prompt if prompt in text else prompt.strip()
        start = text.rfind(needle) if needle else -1
        end_char = start + len(needle) if start >= 0 else len(text)
        try:
            enc = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
            ids = list(enc["input_ids"])
            offsets = enc["offset_mapping"]
            user_end = max(
                (i for i, (a, b) in enumerate(offsets) if a < end_char and b > a), default=0
            )
        except (NotImplementedError, ValueError, KeyError, TypeError):  # slow tokenizer
            ids = list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
            head = self.tokenizer(text[:end_char], add_special_tokens=False)["input_ids"]
            user_end = min(len(head), len(ids)) - 1
        if start < 0 or not ids:
            user_end = len(ids) - 1
        return Encoded(ids, max(0, min(user_end, len(ids) - 1)))
