"""The review page in a real browser at laptop sizes: feedback never moves Submit, the header's labels are
whole, model Markdown is formatted but inert, and loading the page logs no 404 and no console error.

Screenshots go to ``$MEDREV_ARTEFACTS/screenshots``.
"""

from __future__ import annotations

import shutil

import pytest
from sqlmodel import select

from review_app.db.connect import dispose_engines, get_engine
from review_app.db.engine import write_session
from review_app.db.models import Assignment, ModelResponse, Reviewer, Task

from .browser_support import expect, panel, shot, shown_task, sign_in, start_app, wait_idle
from .test_browser import server  # noqa: F401  (the `medrev app` fixture)

pytestmark = pytest.mark.browser
SIZES = [{"width": 1366, "height": 768}, {"width": 1280, "height": 720}]

# Where Submit and the header's buttons are, and whether a button's label is cut (Streamlit ends a label
# that does not fit with an ellipsis: its text box is then narrower than its text).
LAYOUT = """() => {
  const submit = [...document.querySelectorAll(".mrk-submit")].find((b) => !b.hidden);
  const r = submit.getBoundingClientRect();
  const shown = [...document.querySelectorAll(".st-key-mr-head button")].filter((b) => b.clientWidth > 0);
  const labels = shown.map((b) => {
    const text = b.querySelector("[data-testid='stMarkdownContainer']");
    return {label: text.innerText, cut: text.scrollWidth > text.clientWidth || b.scrollWidth > b.clientWidth};
  });
  return {submit: {top: r.top, bottom: r.bottom, left: r.left, right: r.right}, labels, height: innerHeight};
}"""


def _layout(page) -> dict:
    wait_idle(page)
    page.wait_for_timeout(300)  # the panel sizes itself in the frame after a run
    return page.evaluate(LAYOUT)


def _submit_in_view(layout: dict) -> None:
    box = layout["submit"]
    assert box["top"] >= 0 and box["bottom"] <= layout["height"], box


def _whole(layout: dict, *labels: str) -> None:
    shown = {item["label"]: item["cut"] for item in layout["labels"]}
    for label in labels:
        assert shown.get(label) is False, (label, layout["labels"])


def _toast(page, text: str):
    toast = page.locator("[data-testid='stToast']").filter(has_text=text)
    expect(toast).to_be_visible()
    return toast


def _apart(a: dict, b: dict) -> bool:
    return a["y"] + a["height"] <= b["y"] or b["y"] + b["height"] <= a["y"] or a["x"] + a["width"] <= b["x"]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s['width']}x{s['height']}")
def test_feedback_never_moves_submit_and_the_flag_label_is_whole(server, browser, size):  # noqa: F811
    """Sending a flag, withdrawing it, a refused and an accepted submit: Submit stays on screen, in place."""
    base, _ = server
    page = browser.new_context(viewport=size).new_page()
    page.set_default_timeout(20_000)
    name = f"{size['width']}x{size['height']}"
    try:
        sign_in(page, base, "rev02", "/review")
        expect(page.locator(".mrk-submit")).to_be_visible()
        start = _layout(page)
        _submit_in_view(start)
        _whole(start, "Skip for now", "Flag for lead")

        page.get_by_role("button", name="Flag for lead").click()
        page.get_by_role("textbox", name="Comment for the lead").fill("The stem names two drugs.")
        page.get_by_role("button", name="Send to lead").click()
        toast = _toast(page, "Flag sent to the study lead.").bounding_box()
        assert _apart(toast, page.locator(".mrk-submit").bounding_box())  # the toast does not cover Submit
        assert toast["y"] < size["height"] / 2  # it appears by the flag control, at the top
        expect(page.get_by_role("button", name="Unflag")).to_be_visible()
        flagged = _layout(page)
        shot(page, f"70-flag-sent-{name}")
        _submit_in_view(flagged)
        assert flagged["submit"] == start["submit"]  # not moved at all
        _whole(flagged, "Skip for now", "Unflag")

        page.get_by_role("button", name="Unflag").click()
        _toast(page, "Flag withdrawn.")
        expect(page.get_by_role("button", name="Flag for lead")).to_be_visible()
        unflagged = _layout(page)
        assert unflagged["submit"] == start["submit"]
        _whole(unflagged, "Skip for now", "Flag for lead")

        # The score panel's own messages sit above Submit, inside the panel's height.
        aid = shown_task(page)
        page.evaluate("document.activeElement && document.activeElement.blur()")
        page.keyboard.press("Control+Enter")  # nothing scored yet: refused
        expect(panel(page, aid).locator(".mrk-notice.mrk-warning")).to_contain_text("Not submitted")
        _submit_in_view(_layout(page))
        dims = panel(page, aid).locator(".mrk-dim")
        for i in range(dims.count()):
            dims.nth(i).locator(".mrk-level").first.click()
        wait_idle(page)
        page.keyboard.press("Control+Enter")
        expect(panel(page, aid)).to_have_count(0)
        expect(page.locator(".mrk-notice.mrk-success")).to_contain_text("Thank you!")
        _submit_in_view(_layout(page))
        shot(page, f"71-submitted-notice-{name}")
    finally:
        page.context.close()


HOSTILE_RESPONSE = (
    "# Assessment\n**E. Emergency coronary angiography** is *the* answer.\n\n"
    "- ST elevation in `II, III, aVF`\n- reciprocal changes\n\n"
    "```\nif (troponin) { cath(); }\n```\n\n"
    "[click](javascript:window.__pwned=1) ![pixel](http://203.0.113.9/p.png) <http://203.0.113.9/a>\n"
    '<img src=x onerror="window.__pwned=2"> <script>window.__pwned=3</script> &amp; &#60;b&#62;'
)
LITERALS = [
    "[click](javascript:window.__pwned=1)",
    "![pixel](http://203.0.113.9/p.png)",
    "<http://203.0.113.9/a>",
    '<img src=x onerror="window.__pwned=2">',
    "<script>window.__pwned=3</script>",
    "&amp; &#60;b&#62;",
]


def test_a_markdown_response_is_formatted_and_stays_inert(server, browser):  # noqa: F811
    base, engine = server
    with write_session(engine) as session:
        aid, response_id = session.exec(
            select(Assignment.id, Task.response_id)
            .join(Task, Task.id == Assignment.task_id)
            .join(Reviewer, Reviewer.id == Assignment.reviewer_id)
            .where(Task.rubric == "B", Reviewer.username == "rev01")
        ).first()
        response = session.get(ModelResponse, response_id)
        response.response_text = HOSTILE_RESPONSE
        session.add(response)
    page = browser.new_context(viewport=SIZES[0]).new_page()
    page.set_default_timeout(20_000)
    dialogs, remote = [], []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.on("request", lambda r: remote.append(r.url) if "203.0.113.9" in r.url else None)
    try:
        sign_in(page, base, "rev01", path=f"/review?task={aid}")
        answer = page.locator(".st-key-mr-response")
        expect(answer.locator("strong")).to_have_text("E. Emergency coronary angiography")
        expect(answer.locator("h1")).to_have_text("Assessment")
        expect(answer.locator("li")).to_have_count(2)
        expect(answer.locator("li code")).to_have_text("II, III, aVF")
        expect(answer.locator("pre code")).to_contain_text("if (troponin) { cath(); }")
        for literal in LITERALS:
            expect(answer.get_by_text(literal, exact=False)).to_be_visible()
        wait_idle(page)
        page.wait_for_timeout(1000)
        shot(page, "72-markdown-response")
        assert answer.locator("a, img, script, iframe, svg").count() == 0
        assert page.evaluate("window.__pwned") is None
        assert dialogs == [] and remote == []
    finally:
        page.context.close()


@pytest.fixture
def base_path_server(demo_template, tmp_path):
    """`medrev app` served under ``/medrev`` (``server.baseUrlPath``), as behind a reverse proxy."""
    db = tmp_path / "demo.db"
    shutil.copyfile(demo_template, db)
    process, base = start_app(
        f"sqlite:///{db}", tmp_path, env={"STREAMLIT_SERVER_BASE_URL_PATH": "medrev"}, path="/medrev"
    )
    try:
        yield base, get_engine(f"sqlite:///{db}")
    finally:
        process.terminate()
        process.wait(timeout=20)
        dispose_engines()


@pytest.mark.parametrize("served", ["server", "base_path_server"])
def test_loading_the_review_page_logs_no_404_and_no_console_error(served, request, browser):
    base, _ = request.getfixturevalue(served)
    page = browser.new_context(viewport=SIZES[0]).new_page()
    page.set_default_timeout(20_000)
    failed, errors, asked = [], [], []
    page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    page.on("console", lambda m: errors.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on("request", lambda r: asked.append(r.url))
    try:
        sign_in(page, base, "rev01", "/review")  # the sign-in form at /review, then the signed-in /review
        expect(page.locator(".mrk-submit")).to_be_visible()
        wait_idle(page)
        page.reload()  # the address /review?task=N, loaded again
        expect(page.locator(".mrk-submit")).to_be_visible()
        wait_idle(page)
        page.wait_for_timeout(1500)  # anything the frontend asks for after the first render
        assert failed == [] and errors == []
        assert f"{base}/_stcore/health" in asked and not [u for u in asked if "/review/_stcore/" in u]
    finally:
        page.context.close()
