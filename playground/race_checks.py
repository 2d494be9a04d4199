"""What refuses a race before it starts: ``race_problems`` names a problem per input, and ``validate_inputs`` turns
them into gradio's validation marks (gradio runs it before the race: each faulty input is marked with its message,
``gradio_client`` raises ``ValidationError`` listing them, and nothing races)."""

from __future__ import annotations

import gradio as gr

from pass_core.decoding.bookkeeping import run_prompt_ids
from pass_core.decoding.settings import DecodeSettings
from pass_core.runtime.holder import ModelHolder
from pass_core.runtime.models import LoadedModel
from playground.race_inputs import DEFAULT_RACE, MethodOffer, checkbox_problem, input_problems, whole
from playground.tree_race import tree_problem


def race_problems(prompt, num_lookahead, temperature, top_k, top_p, max_new_tokens, seed, show_rejected=True,
                  fused=False, methods=DEFAULT_RACE, chat_template=True, auto_drafts=False, tree_nodes=0, *,
                  offer: MethodOffer | None = None, loaded: LoadedModel | None = None) -> list[str | None]:
    """What refuses a race, per input in ``validate_inputs``' order (None: fine; ``offer``: the methods offered).
    ``loaded``: the page's model once it has loaded; where every input is fine, a prompt its context cannot hold
    beside max new tokens is the prompt's problem (it was a pop-up alone, over the previous race's panes)."""
    *fields, methods_issue = input_problems(prompt, num_lookahead, temperature, top_k, top_p, max_new_tokens, seed,
                                            methods, offer)
    rejected_issue, fused_issue, template_issue, auto_issue = (
        checkbox_problem(label, value) for label, value in (("show rejected drafts", show_rejected),
                                                            ("fused step", fused), ("chat template", chat_template),
                                                            ("cost-aware draft lengths", auto_drafts)))
    problems = [*fields, rejected_issue, fused_issue, methods_issue, template_issue, auto_issue,
                tree_problem(tree_nodes, fused, auto_drafts)]
    if loaded is not None and not any(problems):
        settings = DecodeSettings(num_lookahead=whole(num_lookahead), max_new_tokens=whole(max_new_tokens),
                                  chat_template=bool(chat_template))
        try:  # as the race encodes it (``race_handler``): a drafting method's run, the strictest
            run_prompt_ids(loaded, prompt, settings)
        except ValueError as err:
            problems[0] = str(err)
    return problems


def validate_inputs(*values, offer: MethodOffer | None = None, holder: ModelHolder | None = None, **named) -> list:
    """One ``gr.validate`` per input (``race_problems``; ``holder``: the page's model, checked against the prompt
    once it has loaded)."""
    loaded = holder.loaded if holder is not None and holder.ready else None
    return [gr.validate(problem is None, problem or "")
            for problem in race_problems(*values, offer=offer, loaded=loaded, **named)]
