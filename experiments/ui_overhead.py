"""UI overhead on decoding (issue 12): the same race, bare and through the page's server, interleaved.

Bare: ``pass_core.race.race`` over the default race's decoders (AR, PaSS, ParallelSpec), events consumed and
dropped; once with the inspector's data off and once on. Page: the app's ``race`` endpoint of ``app.build_demo``
served in this process and streamed by ``gradio_client`` in another process, as a browser would be (every page
update rendered: panes, metrics, charts, theory; serialised and sent), the step-through control live but not
paused. Embedded model, quick suite, greedy,
48 new tokens, L = 3, 1 torch thread. Per variant: wall time per race step (all methods' steps), median over
prompts x repeats; the overhead is page / bare (inspector on) - 1.

Run from the repository root:  .venv/bin/python assets/results/ui_overhead.py   (writes cpu-ui-overhead.json)
"""
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import app  # noqa: E402

from pass_core.bench import load_suite  # noqa: E402
from pass_core.models import load_model  # noqa: E402
from pass_core.race import race  # noqa: E402
from pass_core.registry import METHODS  # noqa: E402
from pass_core.settings import DecodeSettings  # noqa: E402
from pass_core.trace import load_trace  # noqa: E402

REPEATS, TOKENS, K = 2, 48, 3
loaded = load_model()
prompts = [p.prompt for p in load_suite("quick")]
found = {key: METHODS[key].find_files(loaded, K)[0] for key in app.DEFAULT_RACE}


def bare(prompt: str, inspect: bool) -> tuple[float, int]:
    settings = DecodeSettings(num_lookahead=K, max_new_tokens=TOKENS, inspect=inspect)
    start, steps = time.perf_counter(), 0
    for _ in race({key: METHODS[key].decode(loaded, prompt, settings, found[key]) for key in app.DEFAULT_RACE}):
        steps += 1
    return time.perf_counter() - start, steps


demo = app.build_demo(loaded)
_, url, _ = demo.launch(server_name="127.0.0.1", server_port=7871, prevent_thread_lock=True, quiet=True)
# the client (a browser's part) runs in its own process, as a visitor's browser would: it streams every update
CLIENT = f"""
import sys, time, json
from gradio_client import Client
client = Client({url!r}, verbose=False, download_files=False)  # a browser downloads the trace only when asked
for line in sys.stdin:
    start = time.perf_counter()
    job = client.submit(json.loads(line), {K}, 0.0, 0, 1.0, {TOKENS}, 0, True, False, {list(app.DEFAULT_RACE)!r},
                        True, api_name="/race")
    for _ in job:
        pass
    result = job.result()
    print(json.dumps([time.perf_counter() - start, result[{len(METHODS) + len(app.METRIC_LABELS) + 9}]]), flush=True)
"""
client = subprocess.Popen([sys.executable, "-c", CLIENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def page(prompt: str) -> tuple[float, int]:
    client.stdin.write(json.dumps(prompt) + "\n")
    client.stdin.flush()
    elapsed, trace_file = json.loads(client.stdout.readline())
    trace = load_trace(trace_file["path"])  # the trace download's file on the server: the race's steps
    return elapsed, sum(map(len, trace.events.values()))


variants = {"bare, inspector off": lambda p: bare(p, False), "bare, inspector on": lambda p: bare(p, True),
            "page (race endpoint)": page}
for name, fn in variants.items():  # warm-up
    fn("Hello there")
per_step = {name: [] for name in variants}
t0 = time.time()
for r in range(REPEATS):
    for i, prompt in enumerate(prompts):
        order = list(variants) if (i + r) % 2 == 0 else list(reversed(variants))
        for name in order:
            elapsed, steps = variants[name](prompt)
            per_step[name].append(elapsed / steps * 1000)
        print(r, i, f"{time.time() - t0:.0f}s", file=sys.stderr)
client.stdin.close()
client.wait()
demo.close()
out = {name: dict(ms_per_race_step_median=statistics.median(v), samples=len(v)) for name, v in per_step.items()}
base = out["bare, inspector on"]["ms_per_race_step_median"]
ratios = [p / b - 1 for p, b in zip(per_step["page (race endpoint)"], per_step["bare, inspector on"])]
out["page overhead vs bare (inspector on), median of paired ratios"] = statistics.median(ratios)
out["page overhead vs bare (inspector on), ratio of medians"] = out["page (race endpoint)"][
    "ms_per_race_step_median"] / base - 1
out["setup"] = dict(model=loaded.name, suite="quick", prompts=len(prompts), repeats=REPEATS, max_new_tokens=TOKENS,
                    num_lookahead=K, greedy=True, torch_threads=1, race=list(app.DEFAULT_RACE),
                    wall_s=round(time.time() - t0, 1))
print(json.dumps(out, indent=1))
(ROOT / "assets" / "results" / "cpu-ui-overhead.json").write_text(json.dumps(out, indent=1) + "\n")
