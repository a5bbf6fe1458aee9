"""The reports in a real browser: headless Chromium (Debian's `chromium`) opens the reports of a
correct, a partly wrong and a hostile submission, graded by the real pipeline, and the class
index, and looks at them as a student and an instructor would:

- the page loads with no console error, no failed load and no request beyond its own file;
- a screenshot is not blank; the pictures are there, with words, and have a size once shown;
- failed checks expand and collapse with the mouse and with the keyboard (Enter, Space);
- the class index sorts (click and Enter) and filters;
- the index of a 400-student class (results written, no grading) puts its students table on
  the first screen, fits 1280 px and a phone without scrolling sideways, and stays small;
- a phone-width screen scrolls only downwards; printing shows every section;
- nothing a submission printed or returned runs as markup.

Assertions are structural (elements, sizes, counts), never pixel comparisons. See
`tests/chromium.py` for how the browser is driven and why. Set TORCHGRADE_SCREENSHOTS=DIR to
keep a screenshot of every page looked at.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from chromium import Chromium, find_chromium, png_pixels
from conftest import REPO, SOLUTIONS
from grader.commands.grade import grade
from grader.models import CheckResult, ExerciseResult, SubmissionResult
from grader.outputs.outcomes import OUTCOMES
from grader.outputs.report import render_report
from grader.worker.limits import WorkerLimits

pytest.importorskip("websocket", reason="the browser tests need websocket-client "
                    "(pip install -e '.[test]')")
CHROMIUM = find_chromium()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (Debian: apt-get "
                       "install chromium; .ci/run installs it)"),
]

EXERCISES = ["strides_broadcasting", "manual_backward", "training_loops"]
SAMPLES = REPO / "samples"
SHOTS = os.environ.get("TORCHGRADE_SCREENSHOTS")

# Tries to get markup into the page through everything a submission controls: what it prints
# (at import and in a check), exception messages, returned values, dict keys, NaN evidence.
HOSTILE_MANUAL_BACKWARD = '''"""Tries to break the report page."""
import numpy as np

print("<script>window.pwned = 1</script><img src=x onerror='window.pwned = 2'>")


def mse_linear_grads(X, y, w, b):
    print("</pre></details><script>window.pwned = 3</script>")
    raise ValueError("<b>bold</b><script>window.pwned = 4</script>")


def fit_linear_gd(X, y, lr, steps):
    return "<svg onload=window.pwned=5>", float("nan"), [float("nan")] * steps


def softmax_cross_entropy(logits, labels):
    return float("inf"), np.full(logits.shape, np.nan)


def mlp_loss_and_grads(X, labels, params):
    return 1.0, {"W1": np.ones(3), "</title><script>window.pwned=6</script>": 1}
'''


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """A small class graded by `torchgrade grade`: reports and index as students get them."""
    root = tmp_path_factory.mktemp("browser")
    subs = root / "submissions"
    students = {
        "ada_correct": {e: (SOLUTIONS / f"{e}.py").read_text() for e in EXERCISES},
        "dan_partly_wrong": {e: (SAMPLES / "dan_subtle" / f"{e}.py").read_text()
                             for e in EXERCISES},
        "mallory_hostile": {
            "strides_broadcasting": (SAMPLES / "hal_hostile" / "strides_broadcasting.py")
            .read_text(),
            "manual_backward": HOSTILE_MANUAL_BACKWARD},
    }
    for student, files in students.items():
        (subs / student).mkdir(parents=True)
        for exercise, text in files.items():
            (subs / student / f"{exercise}.py").write_text(text)
    out = root / "out"
    started = time.monotonic()
    summary = grade(subs, out=out, exercises=EXERCISES, jobs=2,
                    limits=WorkerLimits(call_timeout=2, load_timeout=10))
    print(f"graded {len(students)} submissions in {time.monotonic() - started:.1f} s")
    assert summary.failures == 0 and summary.graded == len(students)
    return out


@pytest.fixture(scope="module")
def browser():
    with Chromium(CHROMIUM) as b:
        yield b


def open_page(browser, path: Path, name: str, **size):
    started = time.monotonic()
    page = browser.open(path.as_uri(), **size)
    page.name = name
    page.opened_s = time.monotonic() - started
    return page


def shoot(page, suffix: str = "") -> bytes:
    png = page.screenshot()
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        (Path(SHOTS) / f"{page.name}{suffix}.png").write_bytes(page.screenshot(full_page=True))
    return png


def assert_clean(page) -> None:
    """No console error, no failed load, nothing fetched but the page itself."""
    assert page.console_errors() == [], page.console_errors()
    requests = page.requests()
    assert requests and all(url.startswith(("file:", "data:", "about:")) for url in requests), \
        requests


def assert_not_blank(png: bytes) -> None:
    pixels = png_pixels(png)[:, :, :3]
    ink = (pixels.mean(axis=2) < 0.85).mean()  # share of pixels darker than a light tint
    assert pixels.std() > 0.05 and 0.01 < ink < 0.6, (pixels.std(), ink)


PAGES = {"correct": "ada_correct/report.html", "partly_wrong": "dan_partly_wrong/report.html",
         "hostile": "mallory_hostile/report.html", "index": "index.html"}


@pytest.mark.parametrize("name", list(PAGES))
def test_page_loads_clean_and_is_not_blank(graded, browser, name):
    path = graded / PAGES[name]
    assert path.stat().st_size < 1_000_000  # a report stays small enough to mail
    page = open_page(browser, path, name)
    try:
        assert page.opened_s < 10, page.opened_s
        assert_clean(page)
        assert_not_blank(shoot(page))
        headings = page.evaluate("[document.querySelectorAll('h1').length,"
                                 " document.querySelectorAll('h2').length,"
                                 " document.documentElement.lang]")
        assert headings[0] == 1 and headings[1] >= 2 and headings[2] == "en"
        # every picture says in words what it shows
        plots = page.evaluate("""Array.from(document.querySelectorAll('svg.plot')).map(s => [
            s.getAttribute('role'), (s.querySelector('title') || {}).textContent || '',
            (s.querySelector('desc') || {}).textContent || '',
            s.getAttribute('aria-labelledby').split(' ')
                .every(id => document.getElementById(id))])""")
        for role, title, desc, labelled in plots:
            assert role == "img" and len(title) > 10 and len(desc) > 40 and labelled
        # status is a word, not only a colour
        statuses = page.evaluate("Array.from(document.querySelectorAll('.status'))"
                                 ".map(s => s.textContent.trim())")
        labels = [outcome.label for outcome in OUTCOMES.values()]
        assert all(any(label in s for label in labels) for s in statuses), statuses
    finally:
        page.close()


def test_correct_report_says_everything_passed(graded, browser):
    page = open_page(browser, graded / PAGES["correct"], "correct")
    try:
        text = page.evaluate("document.body.innerText")
        assert "Every check passed." in text
        assert page.evaluate("document.querySelectorAll('details.check').length") == 0
        assert page.evaluate("document.querySelectorAll('svg.plot').length") == 0
    finally:
        page.close()


def test_partly_wrong_report_shows_pictures_and_expands(graded, browser):
    page = open_page(browser, graded / PAGES["partly_wrong"], "partly_wrong")
    try:
        assert "What to fix first" in page.evaluate("document.body.innerText")
        kinds = page.evaluate("Array.from(document.querySelectorAll('svg.plot'))"
                              ".map(s => s.getAttribute('aria-labelledby'))")
        # the wrong mse gradient (manual_backward) and the loop that never zeroes gradients
        # (training_loops): error bars, the descent path and its three learning rates, loss
        # curves, gradient ratios and the gradients' histograms per layer
        for kind in ("-grad-errors-", "-descent-", "-lr-sweep-", "-loss-", "-grad-ratio-",
                     "-grad-hist-"):
            assert any(kind in k for k in kinds), (kind, kinds)
        # the new pictures hold their words and are drawn (paths and bars, not an empty frame)
        for kind, words in (("-lr-sweep-", "At lr 0.5: reference leaves the picture"),
                            ("-grad-hist-", "median |grad|")):
            desc, paths = page.evaluate(
                "(() => { const s = Array.from(document.querySelectorAll('svg.plot'))"
                f".find(s => s.getAttribute('aria-labelledby').includes('{kind}'));"
                " return [s.querySelector('desc').textContent,"
                " s.querySelectorAll('path').length]; })()")
            assert words in desc and paths > 20, (kind, desc, paths)
        # a closed check: click opens it, Enter closes it, Space opens it again
        selector = "details.check:not([open])"
        check_id = page.evaluate(f"document.querySelector('{selector}').parentElement.id")
        details = f"document.getElementById('{check_id}').querySelector('details')"
        page.click(f"[id='{check_id}'] > details > summary")
        assert page.evaluate(f"{details}.open") is True
        assert page.evaluate(f"document.activeElement === {details}.querySelector('summary')")
        page.press("Enter")
        assert page.evaluate(f"{details}.open") is False
        page.press(" ")
        assert page.evaluate(f"{details}.open") is True
        # "Expand all": every picture then has a real size on the screen
        page.click("button[data-details='open']")
        sizes = page.evaluate("Array.from(document.querySelectorAll('svg.plot')).map(s => {"
                              " const r = s.getBoundingClientRect();"
                              " return [r.width, r.height]; })")
        assert sizes and all(w >= 200 and h >= 80 for w, h in sizes), sizes
        assert page.evaluate("document.querySelectorAll('details.check:not([open])').length") == 0
        shoot(page, "-expanded")
        page.click("button[data-details='close']")
        assert page.evaluate("document.querySelectorAll('details.check[open]').length") == 0
        assert_clean(page)
    finally:
        page.close()


def test_hostile_content_stays_text(graded, browser):
    page = open_page(browser, graded / PAGES["hostile"], "hostile")
    try:
        assert page.evaluate("typeof window.pwned") == "undefined"
        page.click("button[data-details='open']")
        assert page.evaluate("typeof window.pwned") == "undefined"
        text = page.evaluate("document.body.innerText")
        assert "<script>window.pwned = 4</script>" in text  # shown, as text
        assert page.evaluate("document.querySelectorAll('main script, main img, main b')"
                             ".length") == 0
        assert_clean(page)
    finally:
        page.close()


def test_index_sorts_filters_and_links(graded, browser):
    page = open_page(browser, graded / PAGES["index"], "index")
    try:
        table = "document.getElementById('student-table')"
        names = (f"Array.from({table}.tBodies[0].rows).filter(r => !r.hidden)"
                 ".map(r => r.cells[0].innerText.trim())")
        links = page.evaluate(f"Array.from({table}.querySelectorAll('tbody a'))"
                              ".map(a => a.getAttribute('href'))")
        for student in ("ada_correct", "dan_partly_wrong", "mallory_hostile"):
            assert f"{student}/report.html" in links
        score_col = page.evaluate(f"Array.from({table}.tHead.rows[0].cells)"
                                  ".findIndex(c => c.innerText.trim() === 'Score')")
        page.click(f"#student-table thead th:nth-child({score_col + 1})")
        ascending = page.evaluate(names)
        assert ascending[0] == "mallory_hostile" and ascending[-1] == "ada_correct", ascending
        page.press("Enter")  # the heading has the focus: Enter sorts it the other way
        assert page.evaluate(names) == ascending[::-1]
        sort = page.evaluate(f"{table}.tHead.rows[0].cells[{score_col}].getAttribute('aria-sort')")
        assert sort == "descending"
        page.click("#student-filter")
        page.send("Input.insertText", {"text": "dan"})
        assert page.evaluate(names) == ["dan_partly_wrong"]
        # the checks tables: one per exercise, closed until "Expand all" opens them, a pass
        # rate in words in every row
        assert page.evaluate("document.querySelectorAll('details.exercise-checks[open]')"
                             ".length") == 0
        page.click("button[data-details='open'][data-scope='details.exercise-checks']")
        assert page.evaluate("document.querySelectorAll('details.exercise-checks:not([open])')"
                             ".length") == 0
        rates = page.evaluate("Array.from(document.querySelectorAll('table.checks td.heat'))"
                              ".map(td => td.innerText)")
        assert rates and all(r.strip().endswith(("%", "▼")) for r in rates)
        assert_clean(page)
    finally:
        page.close()


@pytest.mark.parametrize("name", ["partly_wrong", "index"])
def test_phone_width_scrolls_only_downwards(graded, browser, name):
    page = open_page(browser, graded / PAGES[name], f"{name}-phone", width=375, height=800)
    try:
        page.resize(375, 800, mobile=True)
        page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 376, width
        assert_not_blank(shoot(page))
    finally:
        page.close()


def test_print_shows_every_section(graded, browser):
    page = open_page(browser, graded / PAGES["partly_wrong"], "partly_wrong-print")
    try:
        closed = ("(() => { const d = document.querySelector('details.check:not([open])');"
                  " return [d.querySelector('.check-body').checkVisibility(),"
                  " d.getBoundingClientRect().height]; })()")
        visible, height = page.evaluate(closed)
        assert not visible  # on screen a closed check hides its body
        page.media("print")
        visible, printed_height = page.evaluate(closed)
        assert visible and printed_height > height + 50  # on paper it shows
        assert page.evaluate("getComputedStyle(document.querySelector('pre')).maxHeight") == "none"
        pdf = page.print_pdf()
        assert pdf.startswith(b"%PDF") and len(pdf) > 20_000
        page.media("")
    finally:
        page.close()


def test_diagnoses_render_from_the_catalogue(tmp_path, browser):
    """A result carrying diagnoses (what grader/scoring/diagnose.py fills in): each is looked up in
    the
    fault catalogue and shown with its symptom, cause and fix; an unknown id stays plain."""
    from grader.course.faults import catalogue

    fault = next(iter(catalogue().values()))
    check = CheckResult(
        id="training_loops.train_epoch_steps_like_the_reference", exercise="training_loops",
        title="train_epoch steps like the reference", targets=["train_epoch"],
        visibility="visible", points=0, max_points=4, status="failed",
        message="train_epoch(...): at step 2, p.grad was 2.00x the gradient of the batch.",
        call="train_epoch(...)", expected="1x", got="2.00x", hint="zero_grad() first.",
        diagnoses=[fault.id, "not-in-the-catalogue"],
        evidence={"loss_curve": [1.0, 0.8, 0.9, 1.4], "reference_loss_curve": [1.0, 0.8, 0.7, 0.6],
                  "grad_ratio": [1.0, 2.0, 3.0, 4.0]})
    result = SubmissionResult(student="<i>zoe</i>", grader_version="test", checks=[check],
                              exercises=[ExerciseResult(exercise="training_loops", score=0,
                                                        max_score=4)])
    path = tmp_path / "report.html"
    path.write_text(render_report(result))
    page = open_page(browser, path, "diagnoses")
    try:
        text = page.evaluate("document.body.innerText")
        for part in (fault.title, fault.symptom, fault.cause, fault.fix, "not-in-the-catalogue",
                     "<i>zoe</i>"):
            assert part in text, part
        assert page.evaluate("document.querySelectorAll('.diagnosis').length") == 2
        assert page.evaluate("document.querySelectorAll('svg.plot').length") == 2
        assert_clean(page)
    finally:
        page.close()


# --------------------------------------------------------------------------- a class of hundreds
# Issue 41: the index is the page an instructor opens first; with 400 students it must answer
# "who needs help" on its first screen, fit a laptop's width, and stay small.

BIG_CLASS = 400
# the six exercises of `torchgrade demo`: the widest table the course's class makes
BIG_EXERCISES = ["strides_broadcasting", "manual_backward", "autograd_graph", "parameters",
                 "training_loops", "data_pipeline"]
CHECKS_PER_EXERCISE = 9


def wait_for(page, expression: str, timeout: float = 5) -> bool:
    """Whether `expression` turns true within `timeout` (a click's effects run after it)."""
    deadline = time.monotonic() + timeout
    while not (ok := page.evaluate(expression)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return bool(ok)


def synthetic_result(rng, student: str):
    """One plausible result: mostly partial work, and every kind of trouble the index flags
    (grader failures, nothing or an exercise not handed in, syntax errors, crashes, timeouts,
    late penalties, regrades, diagnoses)."""
    from datetime import datetime, timezone

    from grader.course.faults import catalogue
    from grader.models import EarlierGrade

    faults = sorted(catalogue())
    kind = rng.choices(["fine", "failure", "nothing", "missing", "syntax", "crash", "timeout"],
                       weights=[76, 3, 4, 6, 4, 4, 3])[0]
    if kind == "failure":
        return SubmissionResult(student=student, grader_version="test",
                                notes=["the grader failed: the grading process was lost"])
    skill = rng.random()
    broken_exercise = rng.choice(BIG_EXERCISES)
    checks, parts = [], []
    for exercise in BIG_EXERCISES:
        trouble = kind == "nothing" or (kind != "fine" and exercise == broken_exercise)
        exercise_checks = []
        for i in range(CHECKS_PER_EXERCISE):
            check = dict(id=f"{exercise}.check_{i}_matches_the_reference", exercise=exercise,
                         title=f"`{exercise}` part {i} matches the reference",
                         targets=[exercise], visibility="visible" if i < 5 else "hidden",
                         max_points=2.0)
            if trouble and kind in ("nothing", "missing"):
                check.update(points=0, status="error", reason="not_submitted",
                             message=f"no {exercise}.py handed in")
            elif trouble and kind == "syntax":
                check.update(points=0, status="error", reason="not_loaded",
                             message=f"{exercise}.py does not compile")
            elif trouble and kind == "crash":
                check.update(points=0, status="crashed", message="the worker crashed")
            elif trouble and kind == "timeout" and i == 0:
                check.update(points=0, status="timeout", message="ran out of time")
            elif rng.random() < 0.35 + 0.6 * skill:
                check.update(points=2.0, status="passed")
            else:
                # each check tells a few faults of its own apart
                k = BIG_EXERCISES.index(exercise) * CHECKS_PER_EXERCISE + i
                pool = [faults[(3 * k + j) % len(faults)] for j in range(3)]
                check.update(points=0, status="failed", message="returned values that differ",
                             diagnoses=rng.sample(pool, k=rng.choice([0, 1, 1, 2])))
            exercise_checks.append(CheckResult(**check))
        checks += exercise_checks
        notes = ([f"SyntaxError in {exercise}.py, line 3: invalid syntax"]
                 if trouble and kind == "syntax" else [])
        parts.append(ExerciseResult(
            exercise=exercise, notes=notes,
            path=None if trouble and kind in ("nothing", "missing") else f"{exercise}.py",
            score=sum(c.points for c in exercise_checks),
            max_score=sum(c.max_points for c in exercise_checks)))
    late = rng.random() < 0.08
    result = SubmissionResult(
        student=student, grader_version="test", checks=checks, exercises=parts,
        notes=["nothing handed in"] if kind == "nothing" else [],
        days_late=2 if late else 0, late_penalty=5.0 if late else 0.0)
    if rng.random() < 0.05:
        result.replaced = EarlierGrade(final_score=max(0, result.final_score - 6),
                                       max_score=result.max_score,
                                       graded_at=datetime(2026, 1, 1, tzinfo=timezone.utc))
    return result


@pytest.fixture(scope="module")
def big_class(tmp_path_factory):
    """OUT of a 400-student class as `torchgrade index` finds it (each student's results.json,
    the names an LMS download gave them) and the index it writes; no grading."""
    import json
    import random

    from grader.commands.index import index
    from grader.intake.lms import SIDECAR, STAGING
    from grader.intake.submission import OUT_MARKER
    from grader.outputs.writing import write_json

    rng = random.Random(41)
    out = tmp_path_factory.mktemp("class400") / "out"
    out.mkdir()
    (out / OUT_MARKER).write_text("")
    first = ["Ada", "Ben", "Chiara", "Dmitri", "Eun-ji", "Fatima", "Giovanni", "Hannah",
             "Ifeoma", "Jürgen", "Katarzyna", "Luis", "Maximiliano", "Nguyen", "Oluwaseun"]
    last = ["Lovelace", "Okafor", "Rossi-Bianchi", "Wojciechowska", "Van der Berg", "Kim",
            "Fernández García", "Abdullah", "Schwarzenegger", "Thompson"]
    started = time.monotonic()
    for n in range(BIG_CLASS):
        student = f"s{n:04d}_{rng.choice(first).lower().replace('ü', 'u')}"
        write_json(synthetic_result(rng, student), out / student / "results.json")
        staged = out / STAGING / student
        staged.mkdir(parents=True)
        (staged / SIDECAR).write_text(json.dumps(
            {"name": f"{rng.choice(first)} {rng.choice(last)}"}))
    index(out, exercises=BIG_EXERCISES)
    print(f"wrote and indexed {BIG_CLASS} results in {time.monotonic() - started:.1f} s")
    return out / "index.html"


def test_big_class_index_answers_who_needs_help_first(big_class, browser):
    size = big_class.stat().st_size
    assert size < 2_000_000, size
    page = open_page(browser, big_class, "index-400", width=1280, height=900)
    try:
        assert_clean(page)
        shoot(page)
        table = "document.getElementById('student-table')"
        top, height, width, scroll_width, rows = page.evaluate(
            f"[{table}.getBoundingClientRect().top + window.scrollY, window.innerHeight,"
            " window.innerWidth, document.documentElement.scrollWidth,"
            f" {table}.tBodies[0].rows.length]")
        print(f"index of {BIG_CLASS}: {size / 1e6:.2f} MB, students table at {top:.0f} px, "
              f"scrollWidth {scroll_width} in {width}")
        assert rows == BIG_CLASS
        assert top <= 1.5 * height, top  # the students table within the first screen and a half
        assert scroll_width <= width, (scroll_width, width)  # no horizontal scroll of the page
        # ... nor of the table itself: six exercises fit 1280 px, the last column on screen
        fits = page.evaluate(f"(() => {{ const w = {table}.parentElement;"
                             f" const last = {table}.tHead.rows[0].lastElementChild"
                             ".getBoundingClientRect();"
                             " return [w.scrollWidth, w.clientWidth, last.right]; })()")
        assert fits[0] <= fits[1] and fits[2] <= width, fits
        # a student's id and name take one line or two, never five; a row at most four
        names = page.evaluate(f"Array.from({table}.tBodies[0].rows).map(r => {{"
                              " const range = document.createRange();"
                              " range.selectNodeContents(r.cells[0]);"
                              " return range.getBoundingClientRect().height; })")
        heights = page.evaluate(f"Array.from({table}.tBodies[0].rows)"
                                ".map(r => r.getBoundingClientRect().height)")
        line = page.evaluate(f"parseFloat(getComputedStyle({table}).lineHeight)"
                             f" || 1.5 * parseFloat(getComputedStyle({table}).fontSize)")
        assert max(names) <= 2.2 * line, (max(names), line)
        assert max(heights) <= 4 * line, (max(heights), line)

        # who needs help comes first, and the ones flagged are those the summary counts
        flags = page.evaluate(f"Array.from({table}.tBodies[0].rows)"
                              ".map(r => r.classList.contains('needs-help'))")
        needing = sum(flags)
        assert 0 < needing < BIG_CLASS and flags == [True] * needing + [False] * (
            BIG_CLASS - needing), flags
        lead = page.evaluate("document.querySelector('.lead').innerText")
        assert f"{needing} need help" in lead, lead
        first = page.evaluate(f"{table}.tBodies[0].rows[0].cells[1].innerText")
        assert "not graded" in first, first  # grader failures at the very top

        visible = (f"Array.from({table}.tBodies[0].rows).filter(r => !r.hidden)")
        # search: a student's id, then a part of a name
        target = page.evaluate(f"{table}.tBodies[0].rows[123].cells[0].querySelector('a')"
                               ".textContent")
        page.click("#student-filter")
        page.send("Input.insertText", {"text": target})
        assert page.evaluate(f"{visible}.map(r => r.cells[0].innerText.split(' ')[0])") == [
            target]
        assert page.evaluate("document.getElementById('student-filter-status').textContent") \
            == f"1 of {BIG_CLASS} shown"
        page.evaluate("(() => { const i = document.getElementById('student-filter');"
                      " i.value = ''; i.dispatchEvent(new Event('input')); })()")
        page.click("#student-filter")
        page.send("Input.insertText", {"text": "wojciechowska"})
        found = page.evaluate(f"{visible}.map(r => r.innerText.toLowerCase())")
        assert 0 < len(found) < BIG_CLASS and all("wojciechowska" in r for r in found)
        page.evaluate("(() => { const i = document.getElementById('student-filter');"
                      " i.value = ''; i.dispatchEvent(new Event('input')); })()")
        assert page.evaluate(f"{visible}.length") == BIG_CLASS
        # "only who needs help": a click on the box
        page.click("input[data-filter-only]")
        assert page.evaluate(f"{visible}.length") == needing
        assert page.evaluate(f"{visible}.every(r => r.classList.contains('needs-help'))")
        page.click("input[data-filter-only]")
        assert page.evaluate(f"{visible}.length") == BIG_CLASS

        # a click on a heading sorts by it: the percent, lowest first, then highest first
        col = page.evaluate(f"Array.from({table}.tHead.rows[0].cells)"
                            ".findIndex(c => c.innerText.trim() === '%')")
        percents = f"Array.from({table}.tBodies[0].rows).map(r => parseFloat(r.cells[{col}]" \
                   ".getAttribute('data-sort')))"
        page.click(f"#student-table thead th:nth-child({col + 1})")
        ascending = page.evaluate(percents)
        assert ascending == sorted(ascending) and ascending[0] < ascending[-1]
        page.click(f"#student-table thead th:nth-child({col + 1})")
        assert page.evaluate(percents) == sorted(ascending, reverse=True)
        # the student column sorts by name
        page.click("#student-table thead th:nth-child(1)")
        ids = page.evaluate(f"Array.from({table}.tBodies[0].rows)"
                            ".map(r => r.cells[0].getAttribute('data-sort'))")
        assert ids == sorted(ids, key=str.lower)

        # the per-check tables are there, closed; a link to one opens it
        closed = page.evaluate("Array.from(document.querySelectorAll('details.exercise-checks'))"
                               ".map(d => d.open)")
        assert closed == [False] * len(BIG_EXERCISES)
        page.click("table.summary-table tbody a")
        assert wait_for(page, "document.querySelector('details.exercise-checks').open")
        assert_clean(page)
    finally:
        page.close()


def test_big_class_index_on_a_phone(big_class, browser):
    page = open_page(browser, big_class, "index-400-phone", width=390, height=844)
    try:
        page.resize(390, 844, mobile=True)
        width, inner = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert width <= inner, (width, inner)
        page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= inner, (width, inner)
        # the table scrolls inside its own box, and its first column is on screen
        box = page.evaluate("(() => { const t = document.getElementById('student-table');"
                            " const r = t.rows[1].cells[0].getBoundingClientRect();"
                            " return [r.left, r.right, t.parentElement.clientWidth]; })()")
        assert box[0] >= 0 and box[1] <= inner and box[2] <= inner, box
        assert_not_blank(shoot(page))
    finally:
        page.close()
