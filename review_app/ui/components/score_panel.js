// The review page's score panel (a Streamlit v2 component; see scoring.py).
//
// The reviewer's input lives here, in the browser: the panel shows the scores, tracks the active
// dimension itself and turns every keypress or click into an event that names the task (assignment,
// client token, base revision) and the dimension it was meant for. Events go to the server as one
// cumulative list (each setStateValue carries every event the server has not acknowledged yet), so
// events that arrive while a rerun is running are never merged away or applied to another
// dimension; the server applies each exactly once (by source and sequence number) and acknowledges
// it in `data.ack`. A submit event carries the full score vector shown here. After a submit, keys
// and clicks go nowhere until the server answers: to the next task, or back here with a message.
//
// Everything shown comes from `data` and is set as text (textContent / value), never as markup.
//
// Keyboard and screen readers: each dimension is a radio group with one Tab stop (its checked
// score, else its first); Left/Right move between its scores, Space or Enter gives the focused one,
// Up/Down move to the dimension above or below, and a digit scores the active dimension. The focus
// follows the active dimension while it is in the panel, and a new task puts it on the task's first
// dimension. Each score is spoken through the page's live region (a11y.js), each message through
// the panel's own (its footer).

const S = (window.__medrevScorePanel ||= {
  draw: null, // the panel's drawing (below), for the page's later runs, whose component brings no code
  src: newSourceId(),
  seq: 0,
  pending: [],
  send: null,
  view: null,
  root: null,
  listening: false,
});

function newSourceId() {
  const bytes = new Uint8Array(9);
  crypto.getRandomValues(bytes); // available outside secure contexts too (unlike randomUUID)
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function isEditable(target) {
  if (!target || !(target instanceof Element)) return false;
  if (target.isContentEditable) return true;
  const tag = target.tagName;
  if (tag === "TEXTAREA" || tag === "SELECT") return true;
  if (tag === "INPUT") return !["radio", "checkbox", "button", "submit", "range"].includes(target.type);
  return false;
}

// ----- events -----------------------------------------------------------------------------------

function emit(view, event) {
  S.seq += 1;
  const full = { ...event, src: S.src, seq: S.seq, aid: view.aid, token: view.token, base: view.base };
  S.pending.push(full);
  if (S.send) S.send("events", S.pending.slice());
  return full;
}

function pendingFor(view, test) {
  return S.pending.some((e) => e.aid === view.aid && e.token === view.token && test(e));
}

// ----- the view: one task's state in the browser ------------------------------------------------

function newView(data) {
  return {
    aid: data.aid,
    rubric: data.rubric,
    token: data.token,
    base: data.base,
    readonly: !!data.readonly,
    dims: data.dims,
    flagDefs: data.flags,
    scores: { ...(data.scores || {}) },
    flags: new Set(data.chosen_flags || []),
    comment: data.comment || "",
    commentDirty: false,
    commentTimer: null,
    savedAt: data.saved_at || "",
    submitting: 0, // seq of the submit event waiting for the server's answer
    active: 0,
    stops: {}, // dimension index -> index of the score holding its Tab stop (after Left/Right)
    dom: null,
  };
}

function firstUnscored(view, from) {
  const n = view.dims.length;
  for (let k = 0; k < n; k++) {
    const i = (from + k) % n;
    if (view.scores[view.dims[i].key] === undefined) return i;
  }
  return -1;
}

function nextActive(view, after) {
  const i = firstUnscored(view, (after + 1) % view.dims.length);
  if (i >= 0) return i;
  return Math.min(after + 1, view.dims.length - 1);
}

function reconcile(view, data) {
  // The server's state wins for every field with no change of ours still on its way.
  const ack = (data.ack || {})[S.src] || 0;
  if (view.submitting && ack >= view.submitting) view.submitting = 0;
  const server = data.scores || {};
  for (const dim of view.dims) {
    if (!pendingFor(view, (e) => (e.t === "score" && e.dim === dim.key) || e.t === "submit")) {
      if (server[dim.key] === undefined) delete view.scores[dim.key];
      else view.scores[dim.key] = server[dim.key];
    }
  }
  if (!pendingFor(view, (e) => e.t === "flags" || e.t === "submit")) view.flags = new Set(data.chosen_flags || []);
  const box = view.dom && view.dom.comment;
  const typing = box && document.activeElement === box;
  if (!view.commentDirty && !typing && !pendingFor(view, (e) => e.t === "comment" || e.t === "submit")) {
    view.comment = data.comment || "";
  }
  view.readonly = !!data.readonly;
  view.savedAt = data.saved_at || "";
}

// ----- actions ----------------------------------------------------------------------------------

function blocked(view) {
  return view.readonly || view.submitting;
}

function say(text) {
  if (window.medrevA11y) window.medrevA11y.announce(text);
}

function levelFocused(view) {
  const focused = document.activeElement;
  return !!(view.dom && focused && focused.classList.contains("mrk-level") && view.dom.box.contains(focused));
}

function stopOf(view, index) {
  const dim = view.dims[index];
  const chosen = dim.levels.findIndex((l) => l.value === view.scores[dim.key]);
  const stop = view.stops[index];
  return stop !== undefined ? stop : Math.max(0, chosen);
}

function focusActive(view) {
  // The focus goes where the eye goes: the active dimension's Tab stop, scrolled into the score box.
  const d = view.dom;
  if (!d || view.readonly || !d.root.isConnected) return;
  const button = d.dims[view.active].buttons[stopOf(view, view.active)];
  if (button && document.activeElement !== button) button.focus({ preventScroll: true });
  keepInView(d.box, d.dims[view.active].section);
}

function setScore(view, index, value) {
  if (blocked(view)) return;
  const dim = view.dims[index];
  const followFocus = levelFocused(view);
  view.scores[dim.key] = value;
  delete view.stops[index];
  emit(view, { t: "score", dim: dim.key, value });
  view.active = nextActive(view, index);
  render(view, true);
  if (followFocus) focusActive(view);
  const level = dim.levels.find((l) => l.value === value);
  const next = firstUnscored(view, 0) < 0 ? " Every dimension scored." : ` Next: ${view.dims[view.active].name}.`;
  say(`${dim.name}: ${value}, ${level ? level.label : ""}.${view.active === index ? "" : next}`);
}

function toggleFlag(view, key) {
  if (blocked(view)) return;
  if (view.flags.has(key)) view.flags.delete(key);
  else view.flags.add(key);
  emit(view, { t: "flags", flags: view.flagDefs.map((f) => f.key).filter((k) => view.flags.has(k)) });
  render(view, false);
}

function flushComment(view) {
  clearTimeout(view.commentTimer);
  view.commentTimer = null;
  if (view.commentDirty && !blocked(view)) {
    view.commentDirty = false;
    emit(view, { t: "comment", text: view.comment });
  }
}

function submit(view) {
  if (blocked(view)) return;
  clearTimeout(view.commentTimer);
  view.commentDirty = false;
  const scores = {};
  for (const dim of view.dims) {
    if (view.scores[dim.key] !== undefined) scores[dim.key] = view.scores[dim.key];
  }
  const flags = view.flagDefs.map((f) => f.key).filter((k) => view.flags.has(k));
  view.submitting = emit(view, { t: "submit", rubric: view.rubric, scores, flags, comment: view.comment }).seq;
  render(view, false);
}

function onKeyDown(event) {
  const view = S.view;
  if (!view || !S.root || !S.root.isConnected) return;
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
    event.preventDefault();
    if (view.dom && document.activeElement === view.dom.comment) view.comment = view.dom.comment.value;
    submit(view);
    return;
  }
  if (event.ctrlKey || event.metaKey || event.altKey || isEditable(event.target)) return;
  const target = event.target;
  const onLevel = !!(view.dom && target instanceof Element && target.classList.contains("mrk-level"));
  if (event.key === "ArrowDown" || event.key === "ArrowUp") {
    // Elsewhere (the material, a list, the page) the arrow keys scroll as usual.
    const here = target === document.body || target === document.documentElement || S.root.contains(target);
    if (blocked(view) || !here) return;
    event.preventDefault();
    const step = event.key === "ArrowDown" ? 1 : -1;
    view.active = Math.max(0, Math.min(view.dims.length - 1, view.active + step));
    render(view, true);
    if (onLevel) focusActive(view);
    return;
  }
  if (onLevel && ["ArrowLeft", "ArrowRight", "Home", "End"].includes(event.key)) {
    event.preventDefault();
    const i = view.dom.dims.findIndex((d) => d.buttons.includes(target));
    if (i < 0) return;
    const buttons = view.dom.dims[i].buttons;
    const k = buttons.indexOf(target);
    const last = buttons.length - 1;
    const to = { ArrowLeft: k - 1, ArrowRight: k + 1, Home: 0, End: last }[event.key];
    view.stops[i] = Math.max(0, Math.min(last, to));
    render(view, false);
    buttons[view.stops[i]].focus({ preventScroll: true });
    return;
  }
  const dim = view.dims[view.active];
  const level = dim && dim.levels.find((l) => l.key === event.key);
  if (!level) return;
  event.preventDefault();
  if (event.repeat) return; // a held key scores once
  setScore(view, view.active, level.value); // ignored (goes nowhere) while a submit is on its way
}

// ----- DOM --------------------------------------------------------------------------------------

function build(view, data) {
  const root = el("div", "mrk");
  root.dataset.aid = String(view.aid);
  const box = el("div", "mrk-box");
  if (data.purpose) box.appendChild(el("p", "mrk-purpose", data.purpose));
  const dims = view.dims.map((dim, i) => {
    const section = el("section", "mrk-dim");
    section.dataset.dim = dim.key;
    const ids = `mrk-${view.aid}-${i}`;
    const head = el("div", "mrk-head");
    head.appendChild(el("span", "mrk-num", i + 1));
    head.appendChild(el("span", "mrk-name", dim.name));
    const keys = el("span", "mrk-keys", "");
    keys.setAttribute("aria-hidden", "true"); // the hint below Submit says the same
    head.appendChild(keys);
    head.addEventListener("click", () => {
      if (blocked(view)) return;
      view.active = i;
      render(view, true);
    });
    section.appendChild(head);
    const question = el("div", "mrk-question", dim.question);
    question.id = `${ids}-q`;
    section.appendChild(question);
    const group = el("div", "mrk-levels");
    group.setAttribute("role", "radiogroup");
    group.setAttribute("aria-label", dim.name);
    group.setAttribute("aria-describedby", question.id);
    const buttons = dim.levels.map((level, k) => {
      const b = el("button", "mrk-level");
      b.type = "button";
      b.setAttribute("role", "radio");
      // Its name says what it does; its anchor (the level's definition) is its description.
      b.setAttribute("aria-label", `Score ${level.value}, ${level.label}, for ${dim.name}`);
      b.setAttribute("aria-describedby", `${ids}-${k}`);
      b.setAttribute("aria-keyshortcuts", level.key);
      b.dataset.value = String(level.value);
      const top = el("span", "mrk-level-top");
      top.appendChild(el("span", "mrk-value", level.value));
      top.appendChild(el("span", "mrk-label", level.label));
      if (level.key !== String(level.value)) top.appendChild(el("kbd", "mrk-kbd", `key ${level.key}`));
      b.appendChild(top);
      const anchor = el("span", "mrk-anchor", level.anchor);
      anchor.id = `${ids}-${k}`;
      b.appendChild(anchor);
      b.title = `${dim.name}: ${level.value} · ${level.label} (key ${level.key})`;
      b.addEventListener("click", () => setScore(view, i, level.value));
      b.addEventListener("focus", () => {
        // Tabbing into a dimension makes it the active one (the digit keys score it). No scrolling
        // here: the browser keeps a focused control in view, and a box scrolled between a mouse's
        // press and release would lose the click.
        if (view.active === i || blocked(view)) return;
        view.active = i;
        render(view, false);
      });
      group.appendChild(b);
      return b;
    });
    section.appendChild(group);
    box.appendChild(section);
    return { section, buttons, keys };
  });
  let flagButtons = [];
  if (view.flagDefs.length) {
    const wrap = el("div", "mrk-flags");
    wrap.appendChild(el("span", "mrk-flags-title", "Flags"));
    flagButtons = view.flagDefs.map((flag) => {
      const b = el("button", "mrk-flag", flag.label);
      b.type = "button";
      b.dataset.flag = flag.key;
      b.title = flag.help;
      b.addEventListener("click", () => toggleFlag(view, flag.key));
      wrap.appendChild(b);
      return b;
    });
    box.appendChild(wrap);
  }
  const label = el("label", "mrk-comment-label", "Comment (optional)");
  const comment = el("textarea", "mrk-comment");
  comment.maxLength = 5000;
  comment.rows = 2;
  comment.setAttribute("aria-label", "Comment (optional)");
  comment.value = view.comment;
  comment.addEventListener("input", () => {
    view.comment = comment.value;
    view.commentDirty = true;
    clearTimeout(view.commentTimer);
    view.commentTimer = setTimeout(() => flushComment(view), 800);
  });
  comment.addEventListener("blur", () => flushComment(view));
  label.appendChild(comment);
  box.appendChild(label);
  root.appendChild(box);

  const foot = el("div", "mrk-foot");
  // A live region: a screen reader says each message (a submit's confirmation, a refusal) as it appears.
  const notice = el("div", "mrk-notice");
  notice.setAttribute("role", "status");
  notice.setAttribute("aria-live", "polite");
  const hint = el("div", "mrk-hint");
  const submitButton = el("button", "mrk-submit", data.submit_label);
  submitButton.type = "button";
  submitButton.addEventListener("click", () => {
    if (document.activeElement === comment) view.comment = comment.value;
    submit(view);
  });
  foot.appendChild(notice);
  foot.appendChild(hint);
  foot.appendChild(submitButton);
  root.appendChild(foot);
  view.dom = { root, box, dims, flagButtons, comment, foot, notice, hint, submit: submitButton };
  return root;
}

function render(view, scrollActive) {
  const d = view.dom;
  if (!d) return;
  d.root.classList.toggle("mrk-busy", !!view.submitting);
  d.root.classList.toggle("mrk-readonly", view.readonly);
  view.dims.forEach((dim, i) => {
    const { section, buttons, keys } = d.dims[i];
    const value = view.scores[dim.key];
    const active = i === view.active && !view.readonly;
    section.classList.toggle("mrk-active", active);
    section.dataset.score = value === undefined ? "" : String(value);
    keys.textContent = active ? `keys ${dim.levels.map((l) => l.key).join(" ")}` : "";
    const stop = stopOf(view, i);
    buttons.forEach((b, k) => {
      const on = dim.levels[k].value === value;
      b.classList.toggle("mrk-on", on);
      b.setAttribute("aria-checked", on ? "true" : "false");
      b.tabIndex = k === stop ? 0 : -1;
      b.disabled = view.readonly;
    });
  });
  d.flagButtons.forEach((b) => {
    const on = view.flags.has(b.dataset.flag);
    b.classList.toggle("mrk-on", on);
    b.setAttribute("aria-pressed", on ? "true" : "false");
    b.disabled = view.readonly;
  });
  if (document.activeElement !== d.comment && d.comment.value !== view.comment) d.comment.value = view.comment;
  d.comment.disabled = view.readonly;
  const dim = view.dims[view.active];
  const saved = view.savedAt ? ` · draft saved ${view.savedAt}` : "";
  d.hint.textContent = view.readonly
    ? ""
    : view.submitting
      ? "Submitting…"
      : `Keys ${dim.levels.map((l) => l.key).join(" ")} score ▶ ${dim.name} · ↑↓ move · Ctrl+Enter submits${saved}`;
  d.submit.disabled = !!view.submitting;
  d.submit.hidden = view.readonly;
  if (scrollActive && !view.readonly) keepInView(d.box, d.dims[view.active].section);
}

function showNotice(view, notice) {
  const n = view.dom.notice;
  n.textContent = notice ? notice.text : "";
  n.className = `mrk-notice${notice ? ` mrk-${notice.kind}` : ""}`;
  n.hidden = !notice;
}

function keepInView(box, node) {
  const b = box.getBoundingClientRect();
  const r = node.getBoundingClientRect();
  if (r.top < b.top) box.scrollTop -= b.top - r.top + 6;
  else if (r.bottom > b.bottom) box.scrollTop += Math.min(r.bottom - b.bottom + 6, r.top - b.top - 6);
}

function mainScroller() {
  return document.querySelector("[data-testid='stMain']") || document.scrollingElement;
}

function fit(view) {
  // Size the scroll boxes so the panel's footer (Submit) and the material end within the window.
  const d = view.dom;
  if (!d || !d.root.isConnected) return;
  const bottom = window.innerHeight - 16;
  const top = d.box.getBoundingClientRect().top;
  d.box.style.maxHeight = `${Math.max(160, bottom - top - d.foot.offsetHeight)}px`;
  for (const material of document.querySelectorAll(".st-key-mr-material")) {
    const t = material.getBoundingClientRect().top;
    material.style.maxHeight = `${Math.max(200, bottom - t)}px`;
  }
}

function toTop() {
  // A new task starts at the top of the page and of its material (its response for Rubric B).
  for (const material of document.querySelectorAll(".st-key-mr-material")) material.scrollTop = 0;
  const main = mainScroller();
  if (main) main.scrollTop = 0;
}

window.addEventListener("resize", () => S.view && fit(S.view));

function draw(component) {
  const { data, setStateValue, parentElement } = component;
  S.send = setStateValue;
  if (!S.listening) {
    document.addEventListener("keydown", onKeyDown, true);
    S.listening = true;
  }
  const ack = (data.ack || {})[S.src] || 0;
  S.pending = S.pending.filter((e) => e.seq > ack);

  let view = S.view;
  const fresh = !view || view.aid !== data.aid || view.token !== data.token || !view.dom;
  if (fresh) {
    if (view) clearTimeout(view.commentTimer);
    view = newView(data);
    const first = firstUnscored(view, 0);
    view.active = first >= 0 ? first : 0;
    S.view = view;
    if (S.root) S.root.remove();
    S.root = build(view, data);
  } else {
    reconcile(view, data);
    view.dom.submit.textContent = data.submit_label;
  }
  let remounted = false;
  if (S.root.parentNode !== parentElement) {
    parentElement.appendChild(S.root);
    remounted = true;
  }
  // A new task (the page opened, a submit, Skip) puts the focus on its first dimension, unless the
  // reviewer is typing somewhere.
  const takeFocus = fresh && !isEditable(document.activeElement);
  // A live region speaks changes, not what it held when it appeared: on a new task's panel the
  // message (the last submit's confirmation) is written a moment after the panel is on the page.
  showNotice(view, fresh ? null : data.notice);
  if (fresh && data.notice) {
    setTimeout(() => {
      if (S.view !== view) return;
      showNotice(view, data.notice);
      fit(view);
    }, 250);
  }
  render(view, fresh);
  if (fresh) toTop();
  fit(view);
  requestAnimationFrame(() => {
    fit(view);
    if (fresh) {
      toTop();
      render(view, true);
      if (takeFocus) focusActive(view);
    }
  });
  // A panel mounted again (after another page) starts with no state on the server: resend. An
  // answered submit is not withdrawn here (that would cost a second rerun per submit): the server
  // forgets it once the browser's address has moved on, and the next key or click sends a list
  // without it.
  if (remounted && S.pending.length) S.send("events", S.pending.slice());
  return () => {}; // the DOM is kept between runs so focus and typing survive a rerun
}

S.draw = draw;
export default draw;
