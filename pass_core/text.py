"""Prompt encoding and incremental detokenisation (text pieces per token)."""

from __future__ import annotations

#: Prompts longer than this many characters are refused before tokenising.
MAX_PROMPT_CHARS = 100_000


def encode_prompt(tokenizer, prompt: str, chat_template: bool, max_positions: int | None = None,
                  max_new_tokens: int = 0) -> list[int]:
    """Token ids of the prompt, wrapped in the chat template unless raw.

    Args:
        tokenizer: a Hugging Face tokenizer.
        prompt: the user's text.
        chat_template: apply ``tokenizer.apply_chat_template`` with a generation
            prompt; raw text otherwise (falls back to raw when the tokenizer has none).
        max_positions: the model's context length, if known.
        max_new_tokens: tokens to be generated, counted against the context.

    Returns:
        list of int token ids (non-empty).

    Raises:
        ValueError: empty prompt, or a prompt that (with max_new_tokens and a few
            look-ahead slots) does not fit the model's context.
    """
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError("The prompt is empty: type some text to continue.")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise ValueError(
            f"The prompt has {len(prompt):,} characters; the limit is {MAX_PROMPT_CHARS:,}. Shorten it."
        )
    if chat_template and getattr(tokenizer, "chat_template", None):
        ids = tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=True
        )
        if hasattr(ids, "keys"):  # BatchEncoding in recent transformers
            ids = ids["input_ids"]
        ids = list(ids)
    else:
        ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    if not ids:
        raise ValueError("The prompt produced no tokens: type some text to continue.")
    if max_positions is not None:
        # 16 spare positions for look-ahead tokens / draft blocks beyond the last token
        budget = max_positions - max_new_tokens - 16
        if len(ids) > budget:
            raise ValueError(
                f"The prompt is {len(ids):,} tokens long (chat template included), but the model's context "
                f"holds {max_positions:,} positions, of which {max_new_tokens + 16:,} stay free for the new "
                f"tokens and the drafts. Shorten the prompt to at most {max(budget, 0):,} tokens or lower max "
                f"new tokens."
            )
    return [int(i) for i in ids]


class Detokenizer:
    """Turns a growing list of token ids into text pieces, one per token.

    Incremental decoding over a short window (the method of Hugging Face's text-generation-inference):
    each new token is decoded together with the tokens since the last emitted piece, and the piece is
    what that adds to the window's text. For a tokenizer whose decoding is prefix-stable the pieces
    concatenate to exactly ``tokenizer.decode(ids, skip_special_tokens=True)``; for one that is not
    (a decode that rewrites earlier text) the stream still moves on: a piece is never held back for
    more than the current window, so the pane never freezes.

    A byte-level tokenizer can split one character (an emoji, a CJK glyph) over several tokens;
    the piece of such a token stays "" until the character is whole.
    """

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.prefix_offset = 0  # window start: the tokens whose text the last piece ended
        self.read_offset = 0  # tokens whose text has been emitted

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)

    def add(self, token_id: int, final: bool = False) -> str:
        """Append one token id; return the text it adds (possibly "").

        ``final=True`` flushes an incomplete character as the replacement character,
        exactly as a full decode would.
        """
        self.ids.append(int(token_id))
        prefix = self._decode(self.ids[self.prefix_offset:self.read_offset])
        window = self._decode(self.ids[self.prefix_offset:])
        if window.endswith("\ufffd") and not final:
            return ""  # half a character: wait for the rest
        piece = window[len(prefix):] if window.startswith(prefix) else window[_common_prefix(window, prefix):]
        self.prefix_offset, self.read_offset = self.read_offset, len(self.ids)
        return piece

    def token_text(self, token_id: int) -> str:
        """Standalone text of one token (for rejected drafts shown beside the output)."""
        return self.tokenizer.decode([int(token_id)], skip_special_tokens=False,
                                     clean_up_tokenization_spaces=False)


def _common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix of ``a`` and ``b``."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n
