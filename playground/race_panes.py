"""A race pane's value: a method's step events -> the (text, label) pairs of its ``gr.HighlightedText``, with
step marks between steps, committed newlines marked and rejected drafts' whitespace shown (``race_charts`` draws
the charts and holds the panes' colours and CSS). Pure: no Gradio, no model, no tensor."""

from __future__ import annotations

from pass_core.decoding.events import TOKEN_LABELS, StepEvent

#: A pane's step separator: an unlabelled zero-width space between two steps' tokens, drawn by the page's CSS
#: (``race_charts.STEP_MARK_CSS``) so that a student can count the tokens of each step.
STEP_MARK = "\u200b"


def highlighted_tokens(events: list[StepEvent], show_rejected: bool = True,
                       step_marks: bool = True) -> list[tuple[str, str | None]]:
    """A ``gr.HighlightedText`` value: one (text, label) pair per token, in stream order.

    Args:
        events: one method's step events so far.
        show_rejected: keep rejected drafts (labelled "rejected draft", whitespace made
            visible by ``visible_text``); they are not part of the output, so hiding them
            leaves exactly the output text (once the step marks are taken out).
        step_marks: put ``(STEP_MARK, None)`` between two steps' tokens.

    Returns:
        [(text piece, label from ``TOKEN_LABELS``, or None for a step mark)]; tokens whose piece
        is "" (half of a multi-byte character) are left out: their text arrives with a later token.
    """
    return [(text, label) for text, label, _ in pane_entries(events, show_rejected, step_marks)]


def pane_entries(events: list[StepEvent], show_rejected: bool = True,
                 step_marks: bool = True) -> list[tuple[str, str | None, tuple[int, int] | None]]:
    """``highlighted_tokens`` with where each entry comes from: the same (text, label) pairs in the same order,
    each with (index into ``events``, index into that event's ``tokens``), or None for a step mark. A pane's
    select event gives the entry's index: this maps it back to the step and token (the token inspector).
    """
    out = []
    for e, event in enumerate(events):
        step = []
        for t, token in enumerate(event.tokens):
            if (token.committed and token.text) or (show_rejected and not token.committed):
                step.append((pane_piece(token), TOKEN_LABELS[token.label], (e, t)))
        if step and out and step_marks:
            out.append((STEP_MARK, None, None))
        out.extend(step)
    return out


def entry_source(entries: list, index: int) -> tuple[int, int] | None:
    """(index into the events, index into that event's tokens) of entry ``index`` of ``pane_entries``' list; for a
    step mark, of the first entry of the step it opens (a mark is never last: a step that adds no entry adds no
    mark); None for an index off the pane."""
    if not 0 <= index < len(entries):
        return None
    return entries[index][2] or next(where for _, _, where in entries[index:] if where is not None)


def pane_text(value: list[tuple[str, str | None]]) -> str:
    """The text of a pane value (``highlighted_tokens``) without its step marks and newline marks (``pane_piece``)."""
    return "".join(text for text, label in value if label is not None).replace(NEWLINE_MARK + "\n", "\n")


#: Shown before a committed token's first newline: gradio draws a newline as a line break of no width, so a token
#: "\n" (an accepted, resampled or exact one) had no colour and nothing to click, and a step looked one token short.
NEWLINE_MARK = "↵"


def pane_piece(token) -> str:
    """A token's text in its pane: a committed token as written, with ``NEWLINE_MARK`` before its first newline (the
    line break kept); a rejected draft as ``visible_text`` (not part of the output: no line break)."""
    if not token.committed:
        return visible_text(token.text)
    return token.text.replace("\n", NEWLINE_MARK + "\n", 1)


def visible_text(text: str) -> str:
    """A rejected draft's text with newlines, tabs and lone spaces shown as symbols.

    The draft is not part of the output, so its raw whitespace would only move the text around.
    """
    if not text:
        return "∅"
    text = text.replace("\n", "↵").replace("\t", "⇥")
    return text.replace(" ", "␣") if not text.strip() else text


#: The newest step's outline while stepping through a race (``newest_step_css``): dark, so that it shows on every
#: token colour, outside the token box, so that the colours stay as the legend has them, and dashed, so that it is
#: not taken for the focus (solid, it looked like a second focus ring: helper 79).
NEWEST_STEP_OUTLINE = "outline: 2px dashed #111827; outline-offset: 1px; border-radius: 3px"


def drawn_pieces(text: str) -> int:
    """How many token boxes gradio's ``HighlightedText`` draws for a pane entry's ``text``: one per piece between
    newlines that is not empty. The panes keep gradio's ``show_whitespaces=True``: a piece of spaces, a tab or a
    no-break space has a box too (only with ``show_whitespaces=False`` does gradio leave out a blank piece's box)."""
    return sum(1 for piece in text.split("\n") if piece)


def newest_step_css(event: StepEvent | None, pane_id: str) -> str:
    """A ``<style>`` element that outlines the tokens of ``event``, the newest step of the pane ``#pane_id`` (its last
    tokens), for the step-through: "Next step" then shows what that one step wrote. "" for no step (``event``
    None) or a step with nothing drawn.

    Each step is counted twice, with and without its rejected drafts, and the page's ``body.hide-rejected`` class
    (the "show rejected drafts" toggle, ``race_view.HIDE_REJECTED_JS``) picks the count, so the outline stays right
    when the toggle changes while the race is paused. The boxes are counted as gradio draws them
    (``drawn_pieces``; the CSS ``:nth-last-child(-n+N of .token-container)`` skips its line breaks)."""
    rules = []
    for body, show_rejected in (("body:not(.hide-rejected)", True), ("body.hide-rejected", False)):
        drawn = sum(drawn_pieces(text) for text, _, _ in pane_entries([event], show_rejected, False)) if event else 0
        if drawn:
            rules.append(f"{body} #{pane_id} .token-container:nth-last-child(-n+{drawn} of .token-container) .token")
    return f"<style>{', '.join(rules)} {{{NEWEST_STEP_OUTLINE}}}</style>" if rules else ""
