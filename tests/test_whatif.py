"""The "What if…" panel: predicted speed-ups against docs/algorithms.md section 4's formulas by hand, the curve
presets, bad input named, and this run's measured points."""

from __future__ import annotations

import pytest

from pass_core.decoding.events import DraftRecord, StepEvent, TokenRecord
from pass_core.teaching.whatif import FLAT_CURVE, H200_CURVE, chain_speedup, parse_curve, pass_speedup, what_if
from pass_core.registry import METHODS
from playground import whatif

CPU_LIKE = "1, 1.5, 2, 2.5, 3, 3.5"  # c(w) = (w + 1) / 2: every width costs something different


def by_hand(alpha: float, k: int, c: list[float], drafter: float) -> tuple[float, float]:
    """Section 4: chain S = E_k / (c(k+1) + c_d); PaSS S = (2 + accepted drafts per step) / (2 c(k+1)), with
    E_k = 1 + alpha + ... + alpha^k and accepted drafts per step = E_k - 1."""
    e = sum(alpha ** i for i in range(k + 1))
    return e / (c[k] + drafter), (2 + (e - 1)) / (2 * c[k])


def test_predicted_speedups_follow_the_formula():
    c = [(w + 1) / 2 for w in range(1, 7)]
    for alpha, k, drafter in ((0.6, 3, 0.05), (0.2, 1, 0.0), (1.0, 5, 0.1), (0.0, 2, 0.0)):
        chain, pass_ = by_hand(alpha, k, c, drafter)
        assert chain_speedup(alpha, k, parse_curve(CPU_LIKE), drafter) == pytest.approx(chain)
        assert pass_speedup(alpha, k, parse_curve(CPU_LIKE)) == pytest.approx(pass_)
    # alpha = 0.6, k = 3 on the flat curve: E = 2.176, chain 2.176 / 1.05 = 2.072x, PaSS 3.176 / 2 = 1.588x
    assert chain_speedup(0.6, 3, FLAT_CURVE, 0.05) == pytest.approx(2.0724, abs=1e-4)
    assert pass_speedup(0.6, 3, FLAT_CURVE) == pytest.approx(1.588, abs=1e-4)
    # on the shipped H200 curve c(4) = 1.027: PaSS at alpha 0.5, k 3 yields 2.875 tokens for 2.054 AR steps
    assert pass_speedup(0.5, 3, H200_CURVE) == pytest.approx(2.875 / 2.054, abs=1e-4)
    rows = what_if(0.6, parse_curve(CPU_LIKE), 8, 0.05)
    assert [r.k for r in rows] == [1, 2, 3, 4, 5]  # c(6) is the last width: k <= 5
    assert rows[2].chain_speedup == pytest.approx(by_hand(0.6, 3, c, 0.05)[0])
    assert rows[2].pass_tokens == pytest.approx(1 + rows[2].chain_tokens) and rows[2].pass_cost == pytest.approx(5.0)  # 2 c(4)


def test_view_states_the_formula_numbers_at_the_chosen_k():
    fig, text = whatif.whatif_view(0.6, 3, whatif.TYPED, CPU_LIKE, 0.05, None)
    chain, pass_ = by_hand(0.6, 3, [(w + 1) / 2 for w in range(1, 7)], 0.05)
    assert f"**{chain:.2f}x**" in text and f"**{pass_:.2f}x**" in text
    speed = [t for t in fig.data if t.xaxis == "x2"]  # the lower panel: speed-up per k
    assert speed[0].y[2] == pytest.approx(chain) and speed[1].y[2] == pytest.approx(pass_)
    fig, text = whatif.whatif_view(0.6, 3, whatif.H200, "", 0.0, None)
    assert "**2.12x**" in text and "**1.55x**" in text  # chain 2.176 / 1.027 (H200 c(4)); PaSS 3.176 / 2.054


def test_bad_input_is_named_and_no_machine_curve_says_why():
    assert whatif.whatif_view(0.5, 3, whatif.MACHINE, "", 0.0, None) == (None, whatif.NO_MACHINE_CURVE)
    fig, text = whatif.whatif_view(0.5, 3, whatif.TYPED, "1, x, 2", 0.0, None)
    assert fig is None and text.startswith("⚠ c(w) typed in: 'x' is not a number")
    assert "positive" in whatif.whatif_view(0.5, 3, whatif.TYPED, "1, -2", 0.0, None)[1]
    assert "choose k ≤ 1" in whatif.whatif_view(0.5, 3, whatif.TYPED, "1, 1.5", 0.0, None)[1]
    # each control by name: an emptied box, a value beyond its slider, a k between two whole numbers (was floored)
    for alpha, k, cost, message in ((None, 3, 0.0, "⚠ draft acceptance α is empty: type a number from 0 to 1."),
                                    (1.5, 3, 0.0, "⚠ draft acceptance α must be a number from 0 to 1; got 1.5."),
                                    (0.5, 2.5, 0.0, "⚠ drafts per step k must be a whole number from 1 to 8; got 2.5."),
                                    (0.5, 0, 0.0, "⚠ drafts per step k must be a whole number from 1 to 8; got 0."),
                                    (0.5, 3, float("nan"), "⚠ drafter cost c_d must be a number from 0 to 1; got nan.")):
        assert whatif.whatif_view(alpha, k, whatif.FLAT, "", cost, None) == (None, message)
    assert parse_curve("2; 3") == (1.0, 1.5)  # divided by c(1)
    with pytest.raises(ValueError, match="c\\(w\\) typed in"):
        parse_curve("  ")


def _step(method: str, accepted: int, k: int, step: int) -> StepEvent:
    exact = [TokenRecord(1, "e", "exact")] if method == "pass" else []
    tail = [TokenRecord(4, "s", "resampled")] if accepted < k else [TokenRecord(5, "b", "bonus")]
    drafts = tuple(DraftRecord(i + 1, 2, "a", 0.5, 0.5, 0.1, "accepted" if i < accepted else
                               "rejected" if i == accepted else "not_verified") for i in range(k))
    return StepEvent(method, step, tuple(exact + [TokenRecord(2, "a", "accepted")] * accepted + tail), drafts,
                     forward_passes=2 if method == "pass" else 1, step_s=0.02, num_verified_drafts=k)


def test_a_typed_curve_cheaper_than_one_pass_is_refused_and_read_when_the_box_is_left(tiny):
    """"1, 0.5, 0.2, 0.1" predicted a 14.51x chain without a word (the app refuses such a measured curve); text typed
    and then left with Tab was not read (only Enter), so the old curve's numbers stayed under the new text."""
    from playground import page

    with pytest.raises(ValueError, match=r"c\(2\) = 0.5 is below c\(1\) = 1: a pass over 2 tokens cannot cost less"):
        parse_curve("1, 0.5, 0.2, 0.1")
    assert parse_curve("2, 2, 3") == (1.0, 1.0, 1.5)  # equal costs are possible (a GPU's flat curve)
    demo = page.build_demo(tiny)
    (typed,) = [c for c in demo.blocks.values() if getattr(c, "elem_id", None) == "whatif-typed"]
    (view,) = [fn for fn in demo.fns.values() if getattr(fn.fn, "__name__", "") == "whatif_view"
               and fn.get_config()["trigger_after"] is None]  # the controls' listener (not the one after a race)
    assert {(typed._id, "submit"), (typed._id, "blur")} <= set(view.targets)


def test_this_machine_before_a_race_and_a_redraw_after_one_while_open(tiny, fixed_pass_cost):
    """Before any race "this machine" draws the curve measured when the model loaded (it said "measured at the first
    race", and a replay had none); it measures nothing itself. A finished race, or a replay, redraws the panel while
    it is open (it kept the numbers from before the race, without the race's diamonds, until a control was
    touched)."""
    import gradio as gr

    from pass_core.runtime.pass_cost import pass_cost_curves
    from playground import page

    demo = page.build_demo(tiny)
    views = [fn for fn in demo.fns.values() if getattr(fn.fn, "__name__", "") == "whatif_view"]
    (controls,) = [fn for fn in views if fn.get_config()["trigger_after"] is None]
    afters = {fn.get_config()["trigger_after"]: fn for fn in views if fn is not controls}  # a race's, a replay's
    shown = {fn.api_name: i for i, fn in demo.fns.items() if fn.api_name in ("race", "replay")}
    assert set(afters) == set(shown.values()) and all(fn.trigger_only_on_success for fn in afters.values())
    after = afters[shown["race"]]
    plot, text = controls.fn(0.6, 3, whatif.MACHINE, "", 0.1, None)
    assert text == whatif.NO_MACHINE_CURVE and plot["visible"] is False  # nothing measured yet (nor by the panel)
    pass_cost_curves(tiny)  # the start-up measurement (``fixed_pass_cost``'s curve)
    plot, text = controls.fn(0.6, 3, whatif.MACHINE, "", 0.1, None)
    assert plot["visible"] and plot["value"].data and "cost curve this machine (cpu, float32)" in text, text
    assert after.fn(0.6, 3, whatif.MACHINE, "", 0.1, None, False) == (gr.skip(), gr.skip())  # closed: no redraw
    from test_app import run

    state = run(tiny, update_interval_s=0.0)[-1]["state"]
    plot, text = after.fn(0.6, 3, whatif.MACHINE, "", 0.1, state, True)
    assert plot["visible"] and "This run, PaSS: α = " in text, text


def test_this_runs_points_are_marked_on_their_loop():
    ar = [StepEvent("ar", i + 1, (TokenRecord(9, "t", "target"),), step_s=0.01) for i in range(6)]
    events = {"ar": ar, "pass": [_step("pass", m, 3, i + 1) for i, m in enumerate((0, 1, 1, 0))],
              "parallelspec": [_step("parallelspec", m, 2, i + 1) for i, m in enumerate((2, 1))]}
    points = whatif.run_points(events)
    assert points["pass"][0] == 3 and points["pass"][3] == pytest.approx(2 / 6) and points["pass"][4] == "pass"
    assert points["parallelspec"][:2] == (2, 2.5) and points["parallelspec"][4] == "chain"
    assert whatif.run_points(events, fused=True)["pass"][4] == "chain"  # the fused step: one pass per step
    machine = {"c": [1.0, 1.2, 1.4, 1.6, 1.8, 2.0], "ms": [50.0, 60, 70, 80, 90, 100], "device": "cpu",
               "dtype": "float32"}
    state = {"events": events, "fused": False, "show": {"curve": machine}}
    fig, text = whatif.whatif_view(0.5, 3, whatif.MACHINE, "", 0.0, state)
    diamonds = [t for t in fig.data if t.marker.symbol == "diamond"]
    assert len(diamonds) == 4 and "This run, PaSS: α = 0.33 at k = 3" in text  # tokens per step and speed-up
    assert "(the diamond; set α and k to match it" in text
    # on another machine's curve the speed-up measured here is not drawn (it read as "PaSS falls short on an H200")
    other, text = whatif.whatif_view(0.5, 3, whatif.FLAT, "", 0.0, state)
    diamonds = [t for t in other.data if t.marker.symbol == "diamond"]
    assert len(diamonds) == 2 and {t.yaxis for t in diamonds} == {"y"}, [t.yaxis for t in diamonds]
    assert "on this machine, not with the flat c(w) = 1 curve: its diamond marks the tokens per step only" in text
    assert whatif.run_points({"pass": events["pass"]}) == {}  # no AR: no unit of cost
    assert "left out" not in text  # no tree runs; with one, the panel says it leaves them out (it did, unsaid)
    _, trees = whatif.whatif_view(0.5, 3, whatif.FLAT, "", 0.0, dict(state, events={**events, "pass+tree8": []}))
    assert trees.endswith("*Token-tree runs are left out here: the formula is a chain's, and a tree step's expected "
                          "tokens depend on its shape.* Left out: PaSS +tree8."), trees
    # the chain's curve in no method's colour, the two-pass loop's in PaSS's (they were PaSS's green and AR's blue)
    curves = {t.name: t.line.color for t in fig.data if t.mode == "lines+markers"}
    assert curves["PaSS two-pass loop"] == METHODS["pass"].colour
    assert curves["chain (one verification pass)"] not in {m.colour for m in METHODS.values()}


def test_this_machine_says_how_long_ar_steps_took_beside_the_curves_one_token_pass():
    """On "this machine" the panel predicted 0.59x where the race's diamond showed 0.77x (a helper's race on the
    embedded model): its AR steps took 122 ms, the curve's one-token pass 85.5 ms. The panel now names both and what
    the formula leaves out; on another curve, or when AR steps took no longer than the pass, it says nothing."""
    ar = [StepEvent("ar", i + 1, (TokenRecord(9, "t", "target"),), step_s=0.5 if i == 0 else 0.122) for i in range(6)]
    events = {"ar": ar, "pass": [_step("pass", m, 3, i + 1) for i, m in enumerate((0, 1, 1, 0))]}
    machine = {"c": [1.0, 1.2, 1.4, 1.6, 1.8], "ms": [85.5, 102.6, 119.7, 136.8, 153.9], "device": "cpu",
               "dtype": "float32"}
    state = {"events": events, "fused": False, "show": {"curve": machine}}
    _, text = whatif.whatif_view(0.3, 3, whatif.MACHINE, "", 0.0, state)
    assert "AR steps took 122.0 ms each, the curve's one-token pass 85.5 ms" in text and "36.5 ms" in text
    # the helper's race: alpha 0.29, k = 3, c(4) = 2.04: 0.59x predicted, 0.77x measured; with the overhead, 0.76x
    helper = dict(state, show={"curve": dict(machine, c=[1.0, 1.3, 1.6, 2.04, 2.3])})
    _, text = whatif.whatif_view(0.29, 3, whatif.MACHINE, "", 0.0, helper)
    assert "PaSS two-pass loop**: 1 + E = 2.40 tokens per step (one exact token) for 2 c(k+1) = 4.08 AR steps: " \
           "**0.59x**" in text
    assert "(h = 0.43 AR passes;" in text and "chain **0.81x**, PaSS two-pass loop **0.76x**" in text
    assert "AR steps took" not in whatif.whatif_view(0.3, 3, whatif.FLAT, "", 0.0, state)[1]
    quick = dict(state, events=dict(events, ar=[StepEvent("ar", i + 1, (TokenRecord(9, "t", "target"),),
                                                          step_s=0.08) for i in range(6)]))
    assert "AR steps took" not in whatif.whatif_view(0.3, 3, whatif.MACHINE, "", 0.0, quick)[1]


def test_the_plot_is_hidden_while_the_panel_has_nothing_to_draw(tiny, fixed_pass_cost):
    """A refusal (no curve measured yet for "this machine": ``fixed_pass_cost`` forgets earlier tests' measurements)
    or a bad value sat under a large empty plot box on the page; the plot is now hidden until there is a chart to
    draw, and shown with it."""
    from playground import page

    demo = page.build_demo(tiny)
    (view,) = [fn for fn in demo.fns.values() if getattr(fn.fn, "__name__", "") == "whatif_view"
               and fn.get_config()["trigger_after"] is None]
    (plot,) = [c for c in demo.blocks.values() if getattr(c, "elem_id", None) == "whatif-plot"]
    assert plot.visible is False  # before the panel first answers
    for args, message in (((0.5, 3, whatif.MACHINE, "", 0.0, None), whatif.NO_MACHINE_CURVE),
                          ((0.5, 3, whatif.TYPED, "1, x, 2", 0.0, None), "⚠ c(w) typed in: 'x' is not a number"),
                          ((None, 3, whatif.FLAT, "", 0.0, None), "⚠ draft acceptance α is empty")):
        shown, text = view.fn(*args)
        assert shown["visible"] is False and text.startswith(message), args
    shown, text = view.fn(0.5, 3, whatif.FLAT, "", 0.0, None)
    assert shown["visible"] is True and shown["value"].data and "cost curve flat c(w) = 1" in text
