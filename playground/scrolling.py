"""Client-side code of unqueued listeners (each constant is a listener's ``js``): scrolling that keeps a press's
answer in view (on a phone the page is some 11,000 px long, and a button's answer often lands screens away from
it), the step buttons' busy mark and the echo of their answer, Stop's cancel of a queued race."""

from __future__ import annotations

import json

from playground.race_charts import STEP_MARK_CSS_SELECTOR, TOKEN_COLORS, style_rgb

#: Client-side: an arrow key on a radio button (any arrow) or a tab (left, right) focuses and clicks the next (down,
#: right) or previous (up, left) enabled one of its group (its fieldset, its tab list), going round at the ends.
ARROW_KEYS_JS = ("document.addEventListener('keydown', ev => { const el = ev.target; const tab = el instanceof "
                 "Element && el.getAttribute('role') === 'tab'; const radio = el instanceof HTMLInputElement && "
                 "el.type === 'radio'; const step = (tab ? {ArrowRight: 1, ArrowLeft: -1} : {ArrowDown: 1, "
                 "ArrowRight: 1, ArrowUp: -1, ArrowLeft: -1})[ev.key]; const box = tab ? el.closest('[role=tablist]')"
                 " : radio ? el.closest('fieldset') : null; if (!step || !box) return; const group = [...box."
                 "querySelectorAll(tab ? '[role=tab]:not(:disabled)' : 'input[type=radio]:not(:disabled)')].filter("
                 "e => e.offsetParent !== null); const next = group[(group.indexOf(el) + step + group.length) % "
                 "group.length]; ev.preventDefault(); next.focus(); if (!(next.checked || next.getAttribute("
                 "'aria-selected') === 'true')) next.click(); });")


#: Client-side: once the run line says a race has finished, its first two lines ("Finished." and the finish view)
#: go into a live region of their own (``role=status``, ``#race-announcer``, hidden but to screen readers), which a
#: screen reader reads out: nothing said a race had ended (helper 69). The run line itself is not live: during a race
#: it changes every half second. Its lines are read from its markdown, line breaks and blocks, whether shown or not
#: (on the lab's tab ``innerText`` ran them together) and without gradio's queue text over it (at Run it hid the
#: old lines for a moment, and they were announced again: helper 74). A refused setting's message (gradio's
#: ``div.validation-error`` under the input, which no screen reader read) goes into a second region, ``role=alert``
#: (``#error-announcer``), once per message that appears: a refused Run said nothing to a screen reader. It empties
#: once no message is left (a screen reader's user browsing the page met the message of a value fixed since). A
#: stopped race is announced as a finished one (its "Stopped." said nothing), a replay as "Replay of a trace." and its
#: two lines (a replay of the race just run said nothing new), the lab's first line and table once shown (cells read
#: as "name, TV, bound, verdict"), or its "Stopped.", never its progress (gradio's own bar counts aloud). The region
#: is emptied 50 ms before each announcement (a lab's seeded verdicts repeated were the same text again).
ANNOUNCE_JS = ("const live = Object.assign(document.createElement('div'), {id: 'race-announcer'}); live.setAttribute("
               "'role', 'status'); live.style.cssText = 'position:absolute;width:1px;height:1px;overflow:hidden;"
               "clip:rect(0 0 0 0);white-space:nowrap;'; document.body.appendChild(live); let said = ''; "
               "const lines = el => { const out = ['']; const walk = n => { for (const c of n.childNodes) { if ("
               "c.nodeType === 3) out[out.length - 1] += c.textContent; else if (c.nodeType === 1) { const block = "
               "/^(BR|P|DIV|LI|UL|OL|H[1-6]|TABLE|TR|PRE|BLOCKQUOTE)$/.test(c.nodeName); if (block) out.push(''); "
               "walk(c); if (block) out.push(''); else if (/^T[DH]$/.test(c.nodeName)) out[out.length - 1] += ', ';"
               " } } }; walk(el); return out.map(x => x.replace(/\\s+/g, ' ').trim().replace(/,$/, '')).filter(x =>"
               " x); }; let labSaid = ''; const say = text => { live.textContent = ''; setTimeout(() => { live."
               "textContent = text; }, 50); }; const announce = () => { const r = document.querySelector('#run-line "
               "[data-testid=markdown]'); const shown = r ? lines(r) : []; const done = /^(Finished\\.|Stopped\\b)/"
               ".test(shown[0] ?? '') ? (shown.some(l => l.startsWith('Replay of a trace')) ? 'Replay of a trace. ' :"
               " '') + shown.slice(0, 2).join(' ') : ''; if (done !== said) { said = done; if (done) say(done); } "
               "const "
               "lab = document.querySelector('#lab-table [data-testid=markdown]'); const verdict = lab && !document."
               "querySelector('#lab-table .progress-level') ? lab.querySelector('table') ? (lab.querySelector('p')?."
               "textContent.trim() ?? '') + ' ' + lines(lab.querySelector('table')).join('; ') : /^Stopped/.test("
               "lab.textContent.trim()) ? lines(lab).slice(0, 2).join(' ') : '' : ''; if (verdict !== labSaid) { "
               "labSaid = verdict; if (verdict) say(verdict); } warn(); }; const alarm = Object.assign("
               "document.createElement('div'), {id: "
               "'error-announcer'}); alarm.setAttribute('role', 'alert'); alarm.style.cssText = live.style.cssText; "
               "document.body.appendChild(alarm); const warned = new WeakSet(); const warn = () => { const shown = "
               "[...document.querySelectorAll('div.validation-error')]; if (!shown.length && alarm.textContent) "
               "alarm.textContent = ''; const fresh = shown.filter(e => !warned.has(e)); if (!fresh."
               "length) return; fresh.forEach(e => warned.add(e)); const text = fresh.map(e => e.textContent."
               "replace(/\\s+/g, ' ').trim()).join(' '); alarm.textContent = ''; setTimeout(() => { "
               "alarm.textContent = text; }, 50); };")


#: Client-side: Run pressed from the keyboard (Enter or Space on it), once the run line shows the race (racing,
#: finished, paused or stopped), moves the focus (without scrolling) to Pause, where Run's scrolling took the view:
#: it stayed on Run, out of the window, and Pause was 20 Tab presses from Run (helper 79). A refused press keeps it:
#: a new message under an input ends the wait, and the run line is read from its markdown (with gradio's status text
#: over it, a refused Run's line seemed to change, and the focus went to Pause: helper 80). A race queued behind
#: another tab's is waited for, up to 10 minutes. ``window.pressedByKey(button)`` says whether the press being
#: handled came from the keyboard (``REPLAY_SCROLL_JS`` asks it too). A trace chosen in the upload box moves to
#: Replay the focus that gradio's upload drops to the page's body.
KEYBOARD_FOCUS_JS = ("let keyed = null, watch = null; document.addEventListener('keydown', ev => { if (ev.key === "
                     "'Enter' || ev.key === ' ') keyed = {el: ev.target, at: Date.now()}; }, true); window.pressedByKey"
                     " = b => !!b && !!keyed && b.contains(keyed.el) && Date.now() - keyed.at < 1000; document."
                     "addEventListener('click', ev => { const b = ev.target instanceof Element ? ev.target.closest("
                     "'#run-button') : null; if (!window.pressedByKey(b)) return; const line = () => document."
                     "querySelector('#run-line [data-testid=markdown]')?.innerText.trim() ?? ''; const before = "
                     "line(); const marks = () => [...document.querySelectorAll('div.validation-error')]; const seen = "
                     "new Set(marks()); const start = Date.now(); clearInterval(watch); watch = setInterval(() => { "
                     "const now = line(); const refused = marks().some(e => !seen.has(e)); const shown = now !== "
                     "before && /^(Racing|Finished|Paused|Stopped)/.test(now); if (refused || shown || Date.now() - "
                     "start > 600000) clearInterval(watch); if (shown && !refused && (document.activeElement === b || "
                     "document.activeElement === document.body)) [...document.querySelectorAll('#pause-button')].find("
                     "e => e.offsetParent !== null)?.focus({preventScroll: true}); }, 100); }); document."
                     "addEventListener('change', ev => { if (!(ev.target instanceof Element && ev.target.closest("
                     "'#trace-upload'))) return; [300, 1000, 2000].forEach(ms => setTimeout(() => { if (document."
                     "activeElement === document.body) document.getElementById('replay-button')?.focus(); }, ms)); }, "
                     "true);")


#: Client-side, once the page has loaded (``launch(js=...)``): each token in a pane says its kind in a tooltip and in
#: its name for a screen reader ("accepted draft: the"), a step mark is named "end of a step", and each accordion's
#: button says whether it is open (``aria-expanded``). Colour alone told exact, accepted, resampled and bonus tokens
#: apart, a screen reader read every token by its text alone, and Settings never said it was folded (helper 69).
#: Done again 150 ms after the page changes (gradio redraws the panes at every update). The arrow keys move through
#: a radio group (the lessons, the what-if curves) and the tabs (``ARROW_KEYS_JS``): gradio names each radio on its
#: own, so they did nothing (helper 73), and its tabs take no arrow keys (helper 69); of a radio group only the
#: chosen radio (or the first) is a Tab stop, as in a browser's own groups (each of the seven lessons was one: helper
#: 79); a finished race is announced (``ANNOUNCE_JS``); a keyboard's Run moves the focus to Pause
#: (``KEYBOARD_FOCUS_JS``).
PAGE_JS = ("() => { " + ARROW_KEYS_JS + " " + ANNOUNCE_JS + " " + KEYBOARD_FOCUS_JS + " const kinds = "
           + json.dumps({style_rgb(c): label for label, c in TOKEN_COLORS.items()})
           + "; const set = (e, a, v) =>"
           " { if (e.getAttribute(a) !== v) e.setAttribute(a, v); }; const mark = () => { for (const t of document."
           "querySelectorAll('.token-pane .token')) { const style = t.getAttribute('style') || ''; const kind = "
           "Object.keys(kinds).find(c => style.includes(c)); if (kind) { set(t, 'title', kinds[kind]); set(t, "
           "'aria-label', kinds[kind] + ': ' + (t.querySelector('.text')?.textContent ?? '')); } else if (t.matches("
           + repr(STEP_MARK_CSS_SELECTOR) + ")) set(t, 'aria-label', 'end of a step'); } for (const b of document."
           "querySelectorAll('button.label-wrap')) set(b, 'aria-expanded', String(b.classList.contains('open'))); "
           "for (const f of document.querySelectorAll('fieldset')) { const group = [...f.querySelectorAll('input["
           "type=radio]')]; const on = group.find(r => r.checked) ?? group[0]; for (const r of group) set(r, "
           "'tabindex', r === on ? '0' : '-1'); } announce(); };"
           " let due = null; new MutationObserver(() => { if (!due) due = setTimeout(() => { due = null; mark(); }, "
           "150); }).observe(document.body, {subtree: true, childList: true, characterData: true, attributes: true, "
           "attributeFilter: ['class', 'style']}); mark(); }")


def _check_js(selector: str, below: float, to: float) -> str:
    """A JS function that scrolls the first visible element matching ``selector`` up to ``to`` of the window's height
    when its top lies below ``below`` of it, or above the window's top."""
    return ("() => { const e = [...document.querySelectorAll(" + repr(selector) + ")].find(x => x.offsetParent !== "
            "null); if (!e) return; const top = e.getBoundingClientRect().top; if (top > "
            f"{below} * window.innerHeight || top < 0) window.scrollBy({{top: top - {to} * window.innerHeight, "
            "behavior: 'smooth'}); }")


def scroll_into_view_js(selector: str, below: float, to: float) -> str:
    """JS that runs ``_check_js`` at once and again 0.4 s and 1.2 s later, as the page may move under the element
    (a refusal's message that goes, a pane that appears). A listener with it must come before the press's own
    event: gradio runs a click's listeners in turn, each to its end."""
    return ("() => { const check = " + _check_js(selector, below, to) + "; [0, 400, 1200].forEach(ms => "
            "setTimeout(check, ms)); }")


#: On a token clicked in a pane: when the token inspector (under the panes) starts below the window's upper two
#: thirds, scroll it up to a fifth of the window's height, so that the click visibly answers (on a phone, and often
#: on a desktop, the inspector was out of sight below the panes).
SCROLL_TO_INSPECTOR_JS = scroll_into_view_js("#inspector", 0.67, 0.2)
#: On Stop: the panes in view, as on Run.
SCROLL_TO_PANES_JS = scroll_into_view_js(".token-pane", 0.6, 0.4)
#: On Replay: the replayed panes in view, as on Run, once the run line shows the replay (on a phone Replay, the
#: page's last button, left them some 3,000 px above it, and the page did not move); a refused file's mark on the
#: upload box in view instead (the panes' scroll took the view 3,000 px away from it: helper 80). Pressed from the
#: keyboard (``KEYBOARD_FOCUS_JS``), it moves the focus to the first pane's tokens with them (it stayed on Replay).
REPLAY_SCROLL_JS = ("() => { const button = document.getElementById('replay-button'); const keyed = window."
                    "pressedByKey?.(button); const line = () => document.querySelector('#run-line [data-testid="
                    "markdown]')?.textContent ?? ''; const before = line(); const marks = () => [...document."
                    "querySelectorAll('#trace-upload .error')]; const seen = new Set(marks()); const start = "
                    "Date.now(); const panes = " + _check_js(".token-pane", 0.6, 0.4) + "; const watch = setInterval("
                    "() => { const mark = marks().find(e => !seen.has(e)); const now = line(); if (mark) { "
                    "clearInterval(watch); mark.scrollIntoView({block: 'center', behavior: 'smooth'}); } else if ("
                    "now.includes('Replay of a trace') && (now !== before || Date.now() - start > 1500) && !marks()."
                    "length) { clearInterval(watch); panes(); setTimeout(panes, 400); if (keyed && (document."
                    "activeElement === button || document.activeElement === document.body)) [...document."
                    "querySelectorAll('.token-pane .token[tabindex=\"0\"]')].find(e => e.offsetParent !== null)?."
                    "focus({preventScroll: true}); } else if (Date.now() - start > 10000) clearInterval(watch); }, "
                    "100); }")

#: On Run lab: its table, where the progress bar and then the verdicts appear (below the fold on a phone).
SCROLL_TO_LAB_JS = scroll_into_view_js("#lab-table", 0.67, 0.2)

#: On Run: the race's panes in view once the race is accepted (at 1400 x 900 they start under the fold; on a
#: desktop the step buttons stay in view above them), and a refusal's message in view instead when the inputs are
#: refused (a refused Run on a phone scrolled to the panes, 800-1,300 px below the message, and seemed to do
#: nothing). A message is new when it was not on the page at the press (gradio writes a new one per refusal); the
#: panes wait 300 ms for it (validation answers first), and their checks at 0.7 s and 1.5 s stop once a message came
#: (they would scroll back down from it). A message inside a folded accordion (Settings unfolded, a value typed,
#: Settings folded again) unfolds it first: the refused Run showed nothing at all.
RUN_SCROLL_JS = ("() => { const seen = new Set(document.querySelectorAll('div.validation-error')); const start = "
                 "Date.now(); const due = [300, 700, 1500]; const panes = " + _check_js(".token-pane", 0.6, 0.4) +
                 "; const watch = setInterval(() => { const mark = [...document.querySelectorAll('div.validation-"
                 "error')].find(e => !seen.has(e)); if (mark) { clearInterval(watch); for (let a = mark; a && "
                 "mark.offsetParent === null; a = a.parentElement) a.querySelector(':scope > button.label-wrap:not("
                 ".open)')?.click(); setTimeout(() => mark.scrollIntoView({block: 'center', behavior: 'smooth'}), "
                 "100); return; } if (due.length && Date.now() - start >= due[0]) { due.shift(); panes(); } if ("
                 "Date.now() - start > 10000) clearInterval(watch); }, 100); }")


#: Client-side, after a step button's answer: the run line's first sentence when it is the step-through's ("Paused
#: after step 3 of 16 ...", or "Run a race or replay a trace first ..."), shown under the buttons (``#step-echo``);
#: on a desktop the run line is far below them. A sentence ends at a period followed by a space or the end.
STEP_ECHO_JS = ("const r = document.querySelector('#run-line'); const e = document.getElementById('step-echo-text'); "
                "if (r && e) { const m = /^((?:Paused|Run a race)[\\s\\S]*?\\.)(?:\\s|$)/"
                ".exec(r.innerText.trim()); e.textContent = m ? m[1] : ''; }")
#: ... after Resume only the answer that nothing has raced yet ("Paused after step ..." stayed under the buttons while
#: the race went on, but a Resume pressed before any race said nothing where it was pressed).
RESUME_ECHO_JS = STEP_ECHO_JS.replace("(?:Paused|Run a race)", "(?:Run a race)")

#: Client-side, after Stop's reply: press the hidden "cancel race" button, whose listener cancels the page's race
#: event (gradio's ``cancels``): a race still waiting in the queue leaves it; a race that answered Stop has ended.
#: Gradio's page then marks the cancelled race failed when the queue's empty "completed" message for it is handled
#: after the cancel's own "complete" (about 1 Stop in 5 on a waiting race): a red "Error" over "Stopped. Your race
#: was waiting ...". For 3 s, such an "Error" on the run line is dismissed with the status's own Clear button.
CANCEL_RACE_JS = ("() => { document.getElementById('cancel-race')?.click(); const start = Date.now(); "
                  "const watch = setInterval(() => { const r = document.querySelector('#run-line'); "
                  "const error = r && r.querySelector('[data-testid=status-tracker] .error'); "
                  "if (error && /Stopped\\. Your race was waiting/.test(r.innerText)) "
                  "r.querySelector('[data-testid=status-tracker] .clear-status button')?.click(); "
                  "if (Date.now() - start > 3000) clearInterval(watch); }, 50); }")
#: Stop's answer under the step buttons when the race had already finished, or the panes hold a replay: the run line
#: keeps its lines (Stop is unqueued: no toast), and the press seemed to do nothing.
FINISHED_NOTHING_TO_STOP = "Nothing to stop: the race has finished."
REPLAY_NOTHING_TO_STOP = "Nothing to stop: the panes show a replay of a trace."
#: Client-side, after Stop's reply: the run line's first sentence once it is Stop's ("Stopped.", "Nothing to stop: no
#: race is running.") under the step buttons, or what Stop did to a finished race or a replay (nothing: the run line
#: says "Finished." or "Replay of a trace"), looked for every 0.2 s for 15 s (a live race writes it at its next
#: update, up to 2.5 s later): on a phone Stop beside Run answered 4,600 px below it, in the run line alone.
STOP_ECHO_JS = ("() => { const start = Date.now(); const watch = setInterval(() => { const r = document.querySelector("
                "'#run-line'); const e = document.getElementById('step-echo-text'); const line = r ? "
                "r.innerText.trim() : ''; const m = /^((?:Stopped|Nothing to stop)[\\s\\S]*?\\.)(?:\\s|$)/.exec(line); "
                "const said = m ? m[1] : /^Finished\\./.test(line) ? " + repr(FINISHED_NOTHING_TO_STOP)
                + " : /^Replay of a trace/.test(line) ? " + repr(REPLAY_NOTHING_TO_STOP) + " : null; "
                "if (said && e) { e.textContent = said; clearInterval(watch); } "
                "else if (Date.now() - start > 15000) clearInterval(watch); }, 200); }")
#: Client-side, on Stop: the step-through's last answer under the buttons goes (it spoke of a live race), and while a
#: race runs or is paused "Stopping…" stands there until Stop's answer (``STOP_ECHO_JS``): a live race's comes with
#: its next update, and nothing showed the press was taken (Stop shows no spinner: gradio's animates for 4 s after).
STOPPING = "Stopping…"
CLEAR_STEP_ECHO_JS = ("() => { const e = document.getElementById('step-echo-text'); const r = document.querySelector("
                      "'#run-line'); if (e) e.textContent = /^(Racing…|Paused after step)/.test(r ? r.innerText.trim()"
                      " : '') ? " + repr(STOPPING) + " : ''; }")
#: The answer under the step buttons to Run pressed while this tab's race runs (gradio ignores that press) ...
RACE_RUNNING = "A race is running in this tab: press Stop first, or Run again once it has finished."
#: ... or is paused (it said "running", which a paused race did not seem to be; the run line keeps the position).
RACE_PAUSED = "This tab's race is paused: press Resume to finish it, or Stop to end it, then Run."
#: Client-side, on Run: the step-through's last answer under the buttons goes (it spoke of the previous race); while
#: this tab's race runs (its run line says "Racing…") or is paused ("Paused after step N of the M computed so far"),
#: gradio ignores the press, and the line says so instead (the press did nothing that could be seen).
RUN_ECHO_JS = ("() => { const e = document.getElementById('step-echo-text'); const r = document.querySelector("
               "'#run-line'); if (!e) return; const line = r ? r.innerText.trim() : ''; e.textContent = "
               "/^Paused after step \\d+ of the \\d+ computed so far/.test(line) ? " + repr(RACE_PAUSED)
               + " : /^Racing…/.test(line) ? " + repr(RACE_RUNNING) + " : ''; }")


def busy_js(elem_id: str, busy: bool, echo: bool = True) -> str:
    """Client-side: mark the button ``elem_id`` busy (dimmed, a progress cursor, ``aria-busy``, a trailing ⏳,
    clicks ignored) or idle again, then echo its answer under the buttons (``STEP_ECHO_JS``), or with ``echo``
    False only an answer that nothing has raced yet, else clear the echo (``RESUME_ECHO_JS``)."""
    if not busy:
        after = STEP_ECHO_JS if echo else RESUME_ECHO_JS
        return (f"() => {{ const b = document.getElementById('{elem_id}'); if (b) {{ b.removeAttribute('aria-busy'); "
                "b.style.pointerEvents = ''; b.style.opacity = ''; b.style.cursor = ''; } " + after + " }")
    return ("() => { if (!document.getElementById('step-busy-css')) { const s = document.createElement('style'); "
            "s.id = 'step-busy-css'; s.textContent = 'button[aria-busy=\"true\"]::after {content: \" ⏳\"}'; "
            f"document.head.appendChild(s); }} const b = document.getElementById('{elem_id}'); if (b) {{ "
            "b.setAttribute('aria-busy', 'true'); b.style.pointerEvents = 'none'; b.style.opacity = '0.6'; "
            "b.style.cursor = 'progress'; } }")
