// Accessibility repairs of the page around medrev's own content (components/accessibility.py).
//
// Streamlit's markup leaves WCAG 2.1 AA gaps that only the browser can close, and one observer of
// the page closes them whenever Streamlit draws:
// - a container that scrolls (st.container(height=...), the review page's material) becomes a named
//   tab stop, so it can be reached and scrolled with the keyboard alone (2.1.1);
// - a chart becomes an image named by its numbers in words (1.1.1);
// - the navigation becomes a landmark and its link to the page shown says so (1.3.1);
// - the focus goes where the eye goes (2.4.3): into a popover opened from the keyboard and back to
//   its button when it closes, to the control a rerun drew in place of the focused one, to the
//   sign-in form and to the queue's next-task button when they open, to the page's content after a
//   link of the navigation;
// - `window.medrevA11y.announce(text)` speaks through one polite live region that stays on the page
//   across reruns (4.1.3).
//
// Installed by a page script on every page but the review page, where the score panel (a component
// that runs the same code) installs it: either way once per window. Streamlit's sanitiser drops a
// script whose text has a "<" directly before a letter, "/" or "!": none may appear here.

(() => {
  if (window.medrevA11y) {
    window.medrevA11y.soon();
    return;
  }
  // The st.container keys (each its class "st-key-" + key) of the regions that scroll, and what each holds.
  const REGION_NAMES = {
    "mr-material": "Task material (scrolls: arrow keys, Page Up, Page Down)",
    "adj-material": "Task material (scrolls: arrow keys, Page Up, Page Down)",
  };
  const FOCUSABLE =
    "a[href], button:not([disabled]), input:not([disabled]):not([type='hidden']), select:not([disabled])," +
    " textarea:not([disabled]), summary, iframe, [tabindex]:not([tabindex='-1'])";

  function named(region) {
    for (const [key, name] of Object.entries(REGION_NAMES)) {
      if (region.classList.contains(`st-key-${key}`)) return name;
    }
    return "";
  }

  function scrolls(node) {
    // Sizes first (one layout for the whole scan), the computed style only for what overflows.
    if (node.scrollHeight <= node.clientHeight + 1 && node.scrollWidth <= node.clientWidth + 1) return false;
    const style = getComputedStyle(node);
    const y = /(auto|scroll)/.test(style.overflowY) && node.scrollHeight > node.clientHeight + 1;
    const x = /(auto|scroll)/.test(style.overflowX) && node.scrollWidth > node.clientWidth + 1;
    return x || y;
  }

  function makeRegion(node, name) {
    if (node.getAttribute("tabindex") === null) node.setAttribute("tabindex", "0");
    if (!node.getAttribute("role")) node.setAttribute("role", "region");
    if (!node.getAttribute("aria-label")) node.setAttribute("aria-label", name);
  }

  function scrollRegions() {
    // The named regions are tab stops even when they hold a link or a button: the reader scrolls
    // the text from there with the arrow keys. Any other scroller gets a tab stop when nothing in
    // it can take the focus (else the keyboard could not reach the part that is scrolled away).
    for (const key of Object.keys(REGION_NAMES)) {
      for (const region of document.querySelectorAll(`.st-key-${key}`)) makeRegion(region, named(region));
    }
    const main = document.querySelector("[data-testid='stMain']");
    if (!main) return;
    for (const node of main.querySelectorAll("div, pre, section, table")) {
      if (node.hasAttribute("data-mr-region") || node.matches(FOCUSABLE)) continue;
      if (!scrolls(node) || node.querySelector(FOCUSABLE)) continue;
      node.setAttribute("data-mr-region", "");
      makeRegion(node, "Scrollable content");
    }
  }

  function charts() {
    // A chart is an image for a screen reader: its name is the text alternative the figure carries
    // (layout.meta.alt, written by charts.py from the chart's own numbers). The plot's other layers
    // (titles, ticks, hover labels) are hidden from it; the toolbar's buttons stay reachable.
    for (const plot of document.querySelectorAll("[data-testid='stPlotlyChart'] .js-plotly-plot")) {
      const layout = plot.layout || {};
      const meta = layout.meta || {};
      const title = plot.querySelector(".gtitle");
      const alt = typeof meta.alt === "string" && meta.alt ? meta.alt : title ? `Chart: ${title.textContent}` : "";
      const layers = plot.querySelectorAll("svg.main-svg");
      if (!alt || !layers.length) continue;
      layers.forEach((svg, i) => {
        if (i === 0) {
          if (svg.getAttribute("aria-label") !== alt) svg.setAttribute("aria-label", alt);
          svg.setAttribute("role", "img");
          svg.removeAttribute("aria-hidden");
        } else {
          svg.setAttribute("aria-hidden", "true");
        }
      });
    }
  }

  function currentPage() {
    // st.page_link shows the current page in bold only: say it to assistive technology as well.
    const here = window.location.pathname.replace(/\/+$/, "") || "/";
    for (const link of document.querySelectorAll("[data-testid='stPageLink-NavLink']")) {
      let path = "";
      try {
        // The default page's link has an empty href, which would resolve to whatever page is shown.
        const href = link.getAttribute("href") || "./";
        path = new URL(href, window.location.href).pathname.replace(/\/+$/, "") || "/";
      } catch {
        continue;
      }
      if (path === here) link.setAttribute("aria-current", "page");
      else link.removeAttribute("aria-current");
    }
    for (const nav of document.querySelectorAll(".st-key-mr-nav")) {
      nav.setAttribute("role", "navigation");
      nav.setAttribute("aria-label", "Pages");
    }
  }

  // A popover (st.popover, role=dialog) opens in a layer at the end of the page, so Tab from its button
  // never reaches it. The focus moves into it when it opens from the keyboard, Tab cycles inside it
  // like any dialog, and when it closes (Escape, or a rerun that replaces it) the focus goes back to
  // its button's place: the button itself, or whatever button the rerun drew there.
  let popover = null; // { body, home, trigger, placed, until } of the open popover the focus went into
  let goBack = null; // { home, trigger, until } after it closed, until the focus is back
  const POPOVER = "[data-testid='stPopoverBody']";

  function focusables(root) {
    return [...root.querySelectorAll(FOCUSABLE)].filter((n) => n.getClientRects().length && n.tabIndex >= 0);
  }

  function keyClass(node) {
    const holder = node && node.closest("[class*='st-key-']");
    return holder ? [...holder.classList].find((c) => c.startsWith("st-key-")) : "";
  }

  function popovers() {
    const body = document.querySelector(POPOVER);
    const focused = document.activeElement;
    if (body && (!popover || popover.body !== body)) {
      const trigger = focused && focused.closest && focused.closest("[data-testid='stPopoverButton']");
      const first = focusables(body)[0];
      if (trigger && first) {
        popover = { body, home: keyClass(trigger), trigger, placed: first, until: Date.now() + 5000 };
        goBack = null;
        first.focus();
        soon(); // its widgets may still be loading (drawn after the button below them)
      } else if (trigger) {
        soon(); // its content is not drawn yet
      }
    } else if (body && popover && popover.placed && focused === popover.placed) {
      // Streamlit draws a popover's widgets as their code loads: a field drawn above the control the
      // focus went to becomes the first stop, until the reader moves the focus themselves.
      const first = focusables(body)[0];
      if (Date.now() > popover.until) popover.placed = null;
      else if (first && first !== focused) {
        popover.placed = first;
        first.focus();
      }
      if (popover.placed) soon();
    } else if (!body && popover) {
      goBack = { home: popover.home, trigger: popover.trigger, until: Date.now() + 5000 };
      popover = null;
    }
    if (!goBack) return;
    const lost = !focused || focused === document.body || !focused.isConnected;
    if (!lost || Date.now() > goBack.until) {
      goBack = null;
      return;
    }
    const home = goBack.home && document.querySelector(`.${goBack.home}`);
    const back = goBack.trigger.isConnected ? goBack.trigger : home && focusables(home)[0];
    if (back) {
      back.focus();
      goBack = null;
    } else {
      soon(); // the rerun has not drawn the new control yet
    }
  }

  // A rerun that replaces the focused control (Unflag after Flag, a button that changes its label)
  // would drop the focus to the page's start. It goes to the first control of the keyed container
  // that held it instead. The score panel places the focus itself.
  let lastFocus = null; // { node, home, at }
  function remember(event) {
    const node = event.target;
    if (node instanceof Element && !node.closest(".mrk") && !node.closest(POPOVER)) {
      lastFocus = { node, home: keyClass(node.parentElement), at: Date.now() };
    }
  }

  function restoreFocus() {
    const focused = document.activeElement;
    const lost = !focused || focused === document.body || !focused.isConnected;
    if (!lost || !lastFocus || lastFocus.node.isConnected || Date.now() - lastFocus.at > 10000) return;
    const home = lastFocus.home && document.querySelector(`.${lastFocus.home}`);
    const back = home && focusables(home)[0];
    if (back) {
      lastFocus = null;
      back.focus();
    }
  }

  function trapTab(event) {
    if (event.key !== "Tab" || !popover || !popover.body.isConnected) return;
    if (!popover.body.contains(document.activeElement)) return;
    const all = focusables(popover.body);
    if (!all.length) return;
    const first = all[0];
    const last = all[all.length - 1];
    if (event.shiftKey && document.activeElement === first) {
      event.preventDefault();
      last.focus();
    } else if (!event.shiftKey && document.activeElement === last) {
      event.preventDefault();
      first.focus();
    }
  }

  // Where the eye goes when a page opens: the sign-in form's first field, the queue's next-task
  // button. Only when nothing has the focus yet, and once per control.
  const AUTOFOCUS = [
    "[data-testid='stForm']:has([class*='st-key-FormSubmitter-sign_in-']) input",
    ".st-key-mr-start button",
  ];
  const autofocused = new WeakSet();
  function autofocus() {
    const focused = document.activeElement;
    if (focused && focused !== document.body) return;
    for (const selector of AUTOFOCUS) {
      const node = document.querySelector(selector);
      if (node && !autofocused.has(node)) {
        autofocused.add(node);
        node.setAttribute("data-mr-focus", "");
        node.focus();
        return;
      }
    }
  }

  // A link of the navigation opens its page in place, and the focus would stay in the sidebar: it
  // moves to the start of the page's content, as the "Skip to main content" link would take it.
  let shownPath = window.location.pathname;
  function pageChanged() {
    if (window.location.pathname === shownPath) return;
    shownPath = window.location.pathname;
    const focused = document.activeElement;
    const main = document.querySelector("[data-testid='stMain']");
    if (!main || !focused || !focused.closest(".st-key-mr-nav")) return;
    if (main.getAttribute("tabindex") === null) main.setAttribute("tabindex", "-1");
    main.focus({ preventScroll: true });
  }

  let live = null;
  function liveRegion() {
    if (!live || !live.isConnected) {
      live = document.createElement("div");
      live.id = "mr-live";
      live.className = "mr-sr-only";
      live.setAttribute("role", "status");
      live.setAttribute("aria-live", "polite");
      live.setAttribute("aria-atomic", "true");
      document.body.appendChild(live);
    }
    return live;
  }

  let spoken = 0;
  function announce(text) {
    // Emptied first, then filled a moment later: the same words twice in a row are spoken twice.
    const region = liveRegion();
    const mine = ++spoken;
    region.textContent = "";
    setTimeout(() => {
      if (mine === spoken) region.textContent = String(text || "");
    }, 60);
  }

  function repair() {
    try {
      scrollRegions();
      charts();
      currentPage();
      popovers();
      restoreFocus();
      autofocus();
      pageChanged();
      liveRegion();
    } catch (error) {
      console.warn("medrev accessibility repair failed", error);
    }
  }

  let timer = null;
  function soon() {
    if (timer) return;
    timer = setTimeout(() => {
      timer = null;
      repair();
    }, 150);
  }

  window.medrevA11y = { announce, soon, repair };
  new MutationObserver(soon).observe(document.body, { childList: true, subtree: true });
  document.addEventListener("keydown", trapTab, true);
  document.addEventListener("focusin", remember, true);
  window.addEventListener("resize", soon);
  window.addEventListener("popstate", soon);
  repair();
})();
