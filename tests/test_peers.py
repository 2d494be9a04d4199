"""Real peers in the benchmark: transformers' own ``generate()`` on the same model writes the same greedy tokens
as the project's AR (so the bench compares like with like), and its runs flow through the same summary."""

from __future__ import annotations

import dataclasses

import pytest

from pass_core.bench.peers import PEERS, blank_unseen, check_peers, generate_peer
from pass_core.bench.summary import BenchRun, RunKey, aggregate
from pass_core.decoding.events import output_token_ids
from pass_core.decoding.settings import DecodeSettings
from pass_core.registry import METHODS

PROMPTS = ["hello world", "def f(x):\n    return", "The quick brown fox"]


def _ar(loaded, prompt, settings):
    return output_token_ids(METHODS["ar"].decode(loaded, prompt, settings))


@pytest.mark.parametrize("peer", list(PEERS))
def test_greedy_peer_tokens_equal_ar_on_the_tiny_model(tiny, peer):
    settings = DecodeSettings(max_new_tokens=24, temperature=0.0)
    for prompt in PROMPTS:
        events = generate_peer(tiny, peer, prompt, settings)
        assert output_token_ids(events) == _ar(tiny, prompt, settings), (peer, prompt)
        assert events[-1].finish_reason in ("eos", "max_new_tokens") and all(e.step_s >= 0 for e in events)


def test_a_peer_that_differs_is_seen(tiny):
    """The comparison can fail: a peer run with fewer tokens is not equal to AR."""
    settings = DecodeSettings(max_new_tokens=24, temperature=0.0)
    short = generate_peer(tiny, "hf-generate", PROMPTS[0], settings.with_(max_new_tokens=12))
    assert output_token_ids(short) != _ar(tiny, PROMPTS[0], settings)


def test_unknown_peer_is_refused_by_name():
    with pytest.raises(ValueError, match="Unknown baseline 'vllm'.*hf-generate"):
        check_peers(["hf-generate", "vllm"])


def test_peer_runs_in_the_summary_and_the_fastest_ar(tiny):
    """Peers and AR on another name go through ``aggregate``: speed-ups against the fastest AR entry, transformers'
    ``generate()`` included (it is AR; at 2 threads it beat our AR, 7.1 vs 7.0 tokens/s, while the report named
    our AR the fastest), the prompt-lookup peer not; per-step metrics a peer cannot see blanked; exact match
    against AR. Step times are set (``timed``), so that which entry is fastest does not depend on this machine."""
    settings = DecodeSettings(max_new_tokens=8, temperature=0.0)

    def timed(events, step_s):
        return [dataclasses.replace(e, step_s=step_s) for e in events]

    def summary_with(times: dict) -> dict:
        runs = []
        for i, prompt in enumerate(PROMPTS[:2]):
            runs.append(BenchRun(RunKey("ar", None, 0.0, 0, i), "c",
                                 timed(METHODS["ar"].decode(tiny, prompt, settings), times["ar"])))
            for peer in PEERS:
                runs.append(BenchRun(RunKey(peer, None, 0.0, 0, i), "c",
                                     timed(generate_peer(tiny, peer, prompt, settings), times[peer])))
        return aggregate(runs, [3], [0.0], backends={"ar": "fp32", **{peer: "fp32" for peer in PEERS}})

    summary = summary_with({"ar": 0.01, "hf-generate": 0.02, "hf-prompt-lookup": 0.001})
    peer, ar = summary["hf-generate"]["L=3,T=0"], summary["ar"]["L=3,T=0"]
    assert peer["exact_match_rate"] == 1.0 and peer["mean_accepted_tokens"] is None and peer["tokens_per_s"] > 0
    assert ar["fastest_ar"] == "ar" and ar["speedup_vs_fastest_ar"] == pytest.approx(1.0)  # lookup: not an AR
    assert peer["speedup_vs_fastest_ar"] == pytest.approx(0.5)
    summary = summary_with({"ar": 0.01, "hf-generate": 0.008, "hf-prompt-lookup": 0.001})
    ar = summary["ar"]["L=3,T=0"]
    assert ar["fastest_ar"] == "hf-generate" and ar["speedup_vs_fastest_ar"] == pytest.approx(0.8)
    assert blank_unseen({"steps": 3, "tokens_per_s": 2.0, "by_category": {"c": {"steps": 1}}}) == \
        {"steps": None, "tokens_per_s": 2.0, "by_category": {"c": {"steps": None}}}


def test_the_peers_are_said_to_run_on_the_fp32_copy_and_compared_with_ar_there(tiny):
    """A run on onednn loads an fp32 copy for the peers: the report said they ran on onednn and gave their speed-up
    "on the same backend" against onednn AR (2.15x where it was 0.82x against fp32 AR). Without fp32 AR in the run
    there is no same-backend ratio (it fell back to the run's AR)."""
    from types import SimpleNamespace

    from pass_core.bench.copies import method_backend

    own, copy32 = SimpleNamespace(backend_name="onednn"), SimpleNamespace(backend_name="fp32")
    assert method_backend("hf-generate", own, {"onednn": own, "fp32": copy32}) == "fp32"
    assert method_backend("hf-generate", own, {"onednn": own}) == "onednn"  # no copy: the peer ran on the run's
    assert (method_backend("ar", own), method_backend("ar@fp32", own)) == ("onednn", "fp32")
    settings = DecodeSettings(max_new_tokens=8, temperature=0.0)
    events = [dataclasses.replace(e, step_s=0.01) for e in METHODS["ar"].decode(tiny, PROMPTS[0], settings)]
    times = {"ar": 0.01, "ar@fp32": 0.005, "hf-generate": 0.01}
    runs = [BenchRun(RunKey(m, None, 0.0, 0, 0), "c", [dataclasses.replace(e, step_s=t) for e in events])
            for m, t in times.items()]
    backends = {"ar": "onednn", "ar@fp32": "fp32", "hf-generate": "fp32"}
    peer = aggregate(runs, [3], [0.0], backends=backends)["hf-generate"]["L=3,T=0"]
    assert peer["backend"] == "fp32" and peer["speedup_same_backend"] == pytest.approx(0.5)
    assert peer["speedup"] == pytest.approx(1.0)  # against AR on the run's backend, as documented
    alone = aggregate(runs[::2], [3], [0.0], backends=backends)["hf-generate"]["L=3,T=0"]
    assert alone["speedup_same_backend"] is None


@pytest.mark.slow
def test_greedy_hf_generate_equals_ar_on_the_embedded_model(smollm):
    settings = DecodeSettings(max_new_tokens=32, temperature=0.0)
    for prompt in ["Write a haiku about rain", "Repeat this sentence exactly: the cat sat on the mat."]:
        ar = _ar(smollm, prompt, settings)  # once per prompt (it ran once per peer: 64 more passes)
        for peer in PEERS:
            assert output_token_ids(generate_peer(smollm, peer, prompt, settings)) == ar, (peer, prompt)
