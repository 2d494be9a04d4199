"""Prompt encoding and incremental detokenisation (text pieces per token)."""

from __future__ import annotations

from pass_core.decoding.settings import SettingError

#: Prompts longer than this many characters are refused before tokenising.
MAX_PROMPT_CHARS = 100_000


def count(n: int, word: str) -> str:
    """"1 thread", "2 threads", "3 passes": ``n`` and ``word``, with an s (es after s) unless ``n`` is 1."""
    return f"{n} {word}{'' if n == 1 else 'es' if word.endswith('s') else 's'}"


def check_prompt(prompt: str) -> None:
    """Refuse what no model could take, before any model is loaded.

    Raises:
        ValueError: not text, an empty (or whitespace-only) prompt, one over ``MAX_PROMPT_CHARS`` characters, or
            one that is not valid Unicode (a lone surrogate, e.g. from bytes that were not UTF-8 on a command
            line: no tokenizer can encode it).
    """
    if not isinstance(prompt, str):
        raise ValueError(f"The prompt must be text, got {type(prompt).__name__}.")
    if not prompt.strip():
        raise ValueError("The prompt is empty: type some text to continue.")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise ValueError(
            f"The prompt has {len(prompt):,} characters; the limit is {MAX_PROMPT_CHARS:,}. Shorten it."
        )
    try:
        prompt.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ValueError(f"The prompt is not valid text: character {err.start + 1:,} ({ascii(prompt[err.start])}) "
                         "is half of a surrogate pair, or a byte that was not UTF-8. Remove it or retype the "
                         "prompt.") from None


#: Positions kept free beyond max_new_tokens for look-ahead tokens and draft blocks past the last token.
SPARE_POSITIONS = 16


def spare_positions(num_lookahead: int) -> int:
    """Positions a speculative run keeps free beyond its new tokens: ``SPARE_POSITIONS`` plus two per look-ahead
    token (its last step's drafts and look-ahead block)."""
    return SPARE_POSITIONS + 2 * num_lookahead


def encode_prompt(tokenizer, prompt: str, chat_template: bool, max_positions: int | None = None,
                  max_new_tokens: int = 0, length_setting: str | None = "max new tokens",
                  spare: int = SPARE_POSITIONS) -> list[int]:
    """Token ids of the prompt, wrapped in the chat template unless raw.

    Args:
        tokenizer: a Hugging Face tokenizer.
        prompt: the user's text.
        chat_template: apply ``tokenizer.apply_chat_template`` with a generation
            prompt; raw text otherwise (falls back to raw when the tokenizer has none).
        max_positions: the model's context length, if known.
        max_new_tokens: tokens to be generated, counted against the context.
        length_setting: the setting a user can lower to fit the context, named in the message; None where there
            is none (the losslessness lab's 3 tokens are fixed).
        spare: positions kept free beyond ``max_new_tokens`` (``spare_positions`` for a run with drafts; 0 for
            AR, which makes none).

    The user's text is always plain text: a special-token string typed in it (``<|im_end|>``,
    ``<|im_start|>``, ...) is encoded as ordinary characters, so a prompt cannot close its own
    turn or forge another (``plain_text_ids``). Only the chat template's own markup becomes
    special tokens.

    Returns:
        list of int token ids (non-empty).

    Raises:
        ValueError: empty prompt, or a prompt that (with max_new_tokens and a few
            look-ahead slots) does not fit the model's context.
    """
    check_prompt(prompt)
    if chat_template and getattr(tokenizer, "chat_template", None):
        head, lead, trail, rest = _template_around_prompt(tokenizer)
        # the template's plain text next to the message is encoded together with it (the same
        # tokens as the template's own tokenisation), its special-token markup on its own
        ids = _tokens(tokenizer, head) + plain_text_ids(tokenizer, lead + prompt + trail) + _tokens(tokenizer, rest)
    else:
        ids = plain_text_ids(tokenizer, prompt)
    if not ids:
        raise ValueError("The prompt produced no tokens: type some text to continue.")
    if max_positions is not None:
        # ``spare`` positions for look-ahead tokens / draft blocks beyond the last token
        budget = max_positions - max_new_tokens - spare  # prompt tokens that fit beside max_new_tokens
        room = max_positions - len(ids) - spare  # new tokens that fit after this prompt
        if len(ids) > budget:
            fixes = [f"shorten the prompt to at most {budget:,} tokens"] if budget >= 1 else []
            if length_setting and max_new_tokens > 1 and room >= 1:
                fixes.append(f"lower {length_setting} to at most {room:,}")
            if not fixes:  # neither alone is enough
                fixes = [f"shorten the prompt to at most {max_positions - spare - 1:,} tokens and lower "
                         f"{length_setting} "
                         "to 1" if length_setting else "use a model with a longer context"]
            fix = " or ".join(fixes)
            message = (f"The prompt is {len(ids):,} tokens long (chat template included) and {max_new_tokens:,} new "
                       f"tokens are asked for{f', with {spare} more positions kept free for drafts' if spare else ''}: "
                       f"more than the model's context of {max_positions:,} positions. {fix[0].upper()}{fix[1:]}.")
            if length_setting:  # a command line names its option (``--max-new-tokens``), as for any setting
                raise SettingError(message, "max_new_tokens", length_setting)
            raise ValueError(message)
    return [int(i) for i in ids]


#: Stands in for the prompt while the chat template is rendered (private-use characters: no
#: template writes them, and the user's text never passes through the template's tokenisation).
_PROMPT_SLOT = "\ue000prompt\ue001"


def plain_text_ids(tokenizer, text: str) -> list[int]:
    """Token ids of ``text`` as plain text: special-token strings in it become ordinary characters."""
    return [int(i) for i in tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]]


def _tokens(tokenizer, markup: str) -> list[int]:
    """Token ids of chat-template markup, whose special-token strings are real special tokens."""
    return [int(i) for i in tokenizer(markup, add_special_tokens=False)["input_ids"]] if markup else []


def _template_around_prompt(tokenizer) -> tuple[str, str, str, str]:
    """The chat template around the user's message (with the generation prompt), in four parts:
    markup up to its last special token before the message, the plain text between that and the
    message, the plain text after the message up to the next special token, and the rest.

    Raises:
        ValueError: a template that does not place the message exactly once.
    """
    rendered = tokenizer.apply_chat_template([{"role": "user", "content": _PROMPT_SLOT}],
                                             add_generation_prompt=True, tokenize=False)
    if not isinstance(rendered, str) or rendered.count(_PROMPT_SLOT) != 1:
        raise ValueError("This model's chat template does not place the user's message exactly once; "
                         "use the raw prompt (without the chat template) instead.")
    before, after = rendered.split(_PROMPT_SLOT)
    specials = [t for t in getattr(tokenizer, "all_special_tokens", []) if t]
    cut = max((before.rfind(t) + len(t) for t in specials if t in before), default=0)
    stop = min((after.find(t) for t in specials if t in after), default=len(after))
    return before[:cut], before[cut:], after[:stop], after[stop:]


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
