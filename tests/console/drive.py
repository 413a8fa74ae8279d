"""Drives the console in Debian's Chromium with Playwright, as an officer and as a rule
author would (issue 34). Run by tests/api/console.rs against a service it has set up;
the arguments come as one JSON object on the command line:

    {"base": "http://127.0.0.1:PORT", "out": "DIR",
     "officer": {"email": …, "password": …}, "author": {"email": …, "password": …},
     "claim_id": "C-…", "approve": "90.00", "claims": 1000}

Every step asserts what a user would see; a failure exits non-zero with the reason.
Screenshots of each page at 1280 and 390 px wide go to `out`. Prints, as JSON, the id
of the rulebook it published.
"""

import json
import os
import sys

from playwright.sync_api import expect, sync_playwright

ARGS = json.loads(sys.argv[1])
BASE = ARGS["base"]
OUT = ARGS["out"]
CHROMIUM = os.environ.get("CLAIMS_CHROMIUM", "/usr/bin/chromium")


def shoot(page, name):
    """The current page at 1280 and at 390 px wide, whole."""
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=os.path.join(OUT, f"{name}-{width}.png"), full_page=True)
        # Readable at 390 px: nothing wider than the window but the scrolling tables.
        if width == 390:
            overflow = page.evaluate(
                "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
            assert overflow <= 1, f"{name} scrolls sideways at 390 px by {overflow} px"
    page.set_viewport_size({"width": 1280, "height": 900})


def sign_in_with_the_keyboard(page, who):
    page.goto(BASE + "/")
    expect(page).to_have_url(BASE + "/console")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    page.get_by_label("Email").focus()
    page.keyboard.type(who["email"])
    page.keyboard.press("Tab")
    page.keyboard.type(who["password"])
    page.keyboard.press("Enter")


def sign_out(page):
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()


def officer(page):
    sign_in_with_the_keyboard(page, ARGS["officer"])
    expect(page.get_by_role("heading", name="Review queue")).to_be_visible()
    link = page.get_by_role("link", name=ARGS["claim_id"], exact=True)
    expect(link).to_be_visible()
    shoot(page, "queue")
    link.click()
    expect(page.get_by_role("heading", name=f"Claim {ARGS['claim_id']}")).to_be_visible()
    # Its fraud reasons and its receipt: every rule with what it did.
    expect(page.get_by_role("heading", name="Fraud reasons")).to_be_visible()
    expect(page.locator("#fraud-reasons li").first).to_be_visible()
    expect(page.get_by_role("heading", name="Decision receipt")).to_be_visible()
    receipt = page.get_by_role("table", name="Every rule of the rulebook, in order")
    expect(receipt).to_contain_text("big")
    expect(receipt).to_contain_text("when evaluated to true")
    shoot(page, "claim")
    # Claimed with the keyboard, then approved with an amount.
    page.get_by_role("button", name="Claim task").focus()
    page.keyboard.press("Enter")
    amount = page.get_by_label("Approved amount")
    expect(amount).to_be_visible()
    amount.fill(ARGS["approve"])
    page.get_by_role("button", name="Approve", exact=True).click()
    expect(page.locator("#task")).to_contain_text("approve")
    shoot(page, "claim-approved")
    sign_out(page)


def author(page):
    sign_in_with_the_keyboard(page, ARGS["author"])
    page.get_by_role("link", name="Rulebooks").click()
    expect(page.get_by_role("heading", name="Rulebooks")).to_be_visible()
    shoot(page, "rulebooks")
    page.get_by_role("link", name="New draft").click()
    expect(page.get_by_role("heading", name="New draft")).to_be_visible()
    page.get_by_label("Name").fill("Stricter")
    # The draft starts from the active rulebook's one rule; a second one is added with
    # an expression that does not compile.
    page.get_by_role("button", name="Add rule").click()
    second = page.locator("fieldset.rule").nth(1)
    second.get_by_label("Rule id").fill("huge")
    second.get_by_label("Action").select_option("decline")
    second.get_by_label("Reason code").fill("TOO_BIG")
    second.get_by_label("When (CEL)").fill("claim.claim_amount >")
    page.get_by_role("button", name="Save draft").click()
    # The error shows on the second rule, at its expression, and only there.
    error = second.locator(".error")
    expect(error).not_to_be_empty()
    expect(second.get_by_label("When (CEL)")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("fieldset.rule").nth(0).locator(".error")).to_be_empty()
    shoot(page, "draft-error")
    second.get_by_label("When (CEL)").fill("claim.claim_amount > 20000")
    page.get_by_role("button", name="Save draft").click()
    expect(page.get_by_role("heading", name="Rulebook Stricter")).to_be_visible()
    expect(page.locator("#rulebook-status")).to_have_text("draft")
    rulebook_id = page.url.rsplit("/", 1)[1]
    # The backtest over every decided claim, with its transitions.
    page.get_by_label("Most claims").fill(str(ARGS["claims"]))
    page.get_by_role("button", name="Run backtest").click()
    result = page.locator("#backtest-result")
    expect(result.locator("dd").first).to_have_text(str(ARGS["claims"]))
    transitions = page.get_by_role("table", name="Transitions between outcomes")
    expect(transitions).to_contain_text("DECLINED")
    expect(page.get_by_role("table", name="Changed claims (first 20)")).to_be_visible()
    shoot(page, "backtest")
    page.get_by_role("button", name="Publish").click()
    expect(page.locator("#rulebook-status")).to_have_text("active")
    shoot(page, "published")
    sign_out(page)
    return rulebook_id


def main():
    os.makedirs(OUT, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        # Answers the flows expect (401 before signing in, 422 for a draft that does
        # not compile) show as failed loads; anything else the page logs as an error
        # (a script error, a blocked inline style) fails the run.
        page.on(
            "console",
            lambda m: errors.append(m.text)
            if m.type == "error" and not m.text.startswith("Failed to load resource")
            else None,
        )
        officer(page)
        published = author(page)
        browser.close()
    assert not errors, f"the page reported errors: {errors}"
    print(json.dumps({"published": published}))


if __name__ == "__main__":
    main()
