"""The texts root writes for everyone, in Chromium against a real `tollway serve` (embedded): the `Notice`
above every page of a signed-in user (Markdown or HTML drawn safely: no script runs, no `javascript:` link,
no attribute of its own survives; dismissed until it changes), the `Footer` with the About link on every
page, the About page (Markdown, an address, or nothing yet), and the `Logo` before the site's name — with
images allowed from the logo's origin only, in the page's Content-Security-Policy. axe-core finds nothing
serious with the notice and footer shown."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from playwright.sync_api import Page, expect

from server.console.routes import CSP
from tests.console.browser import Server, check_accessibility, set_option, sign_in, tollway

pytestmark = pytest.mark.slow

MARKDOWN_NOTICE = """# Maintenance tonight

The gateway restarts at **22:00 UTC**; see [the status page](https://status.example.com/).

- keys keep working
- [a trap](javascript:window.pwned=1)

<script>window.pwned = 1</script>"""
HTML_NOTICE = ('<p onclick="window.pwned=1" style="color:red">Hello <b>everyone</b>'
               '<script>window.pwned=1</script><img src="x" onerror="window.pwned=1">'
               '<a href="javascript:window.pwned=1">bad</a> <a href="https://ok.example/">good</a></p>'
               '<iframe src="https://evil.example/"></iframe>')


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with tollway(tmp_path_factory.mktemp("console-texts"), set_up=True) as running:
        running.add_user(name="reader")
        yield running


def notice_of(page: Page):  # type: ignore[no-untyped-def]
    return page.get_by_role("complementary", name="Notice")


def test_the_notice_is_markdown_drawn_safely_and_stays_dismissed_until_it_changes(page: Page,
                                                                                 server: Server) -> None:
    set_option(server, "Notice", MARKDOWN_NOTICE)
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if "/api/notice" in r.url else None)
    page.goto(f"{server.url}/login")
    expect(page.get_by_role("heading", level=1, name="Sign in")).to_be_visible()
    expect(notice_of(page)).to_have_count(0)  # signed out: no notice, not even asked for
    assert asked == []

    sign_in(page, server, "reader")
    notice = notice_of(page)
    expect(notice.get_by_role("heading", level=3, name="Maintenance tonight")).to_be_visible()
    expect(notice.locator("strong")).to_have_text("22:00 UTC")
    expect(notice.get_by_role("link", name="the status page")).to_have_attribute("href", "https://status.example.com/")
    expect(notice.get_by_role("link", name="the status page")).to_have_attribute("rel", "noopener noreferrer")
    expect(notice.get_by_role("listitem")).to_have_count(2)
    expect(notice.get_by_text("a trap")).to_be_visible()
    expect(notice.get_by_role("link", name="a trap")).to_have_count(0)  # a javascript: address is no link
    # Markdown's HTML is text, shown as such
    expect(notice).to_contain_text("<script>window.pwned = 1</script>")
    assert notice.locator("script").count() == 0
    assert page.evaluate("window.pwned") is None
    assert len(asked) == 1
    check_accessibility(page, "a page with the notice")

    page.get_by_role("navigation", name="Main").get_by_role("link", name="API keys").click()
    expect(page.get_by_role("heading", level=1, name="API keys")).to_be_visible()
    expect(notice_of(page)).to_be_visible()  # on every page, asked for once
    assert len(asked) == 1

    notice_of(page).get_by_role("button", name="Dismiss").click()
    expect(notice_of(page)).to_have_count(0)
    page.reload()
    expect(page.get_by_role("heading", level=1, name="API keys")).to_be_visible()
    page.wait_for_load_state("networkidle")
    expect(notice_of(page)).to_have_count(0)  # this notice stays dismissed in this browser

    set_option(server, "Notice", MARKDOWN_NOTICE.replace("22:00", "23:00"))
    page.reload()
    expect(notice_of(page).locator("strong")).to_have_text("23:00 UTC")  # a new notice is shown again


def test_an_html_notice_keeps_only_harmless_markup(page: Page, server: Server) -> None:
    set_option(server, "Notice", HTML_NOTICE)
    sign_in(page, server, "reader")
    notice = notice_of(page)
    expect(notice).to_contain_text("Hello everyone")
    expect(notice.locator("b")).to_have_text("everyone")
    expect(notice.get_by_role("link", name="good")).to_have_attribute("href", "https://ok.example/")
    expect(notice.get_by_role("link", name="bad")).to_have_count(0)
    assert notice.locator("script, img, iframe, [onclick], [onerror], [style]").count() == 0
    assert page.evaluate("window.pwned") is None


def test_the_footer_and_the_about_page(page: Page, server: Server) -> None:
    set_option(server, "Footer", "Run by **Example Ltd** · [Terms](/about)")
    set_option(server, "About", "## Who we are\n\nA gateway run by *Example Ltd*.")
    page.goto(f"{server.url}/login")
    footer = page.get_by_role("contentinfo")
    expect(footer.locator("strong")).to_have_text("Example Ltd")
    footer.get_by_role("link", name="About").click()
    expect(page.get_by_role("heading", level=1, name="About")).to_be_visible()
    expect(page.get_by_role("heading", level=3, name="Who we are")).to_be_visible()
    expect(page.get_by_role("main").locator("em")).to_have_text("Example Ltd")

    set_option(server, "About", "https://example.com/about-us")
    page.reload()
    expect(page.get_by_role("link", name="Open the about page")).to_have_attribute(
        "href", "https://example.com/about-us")
    set_option(server, "About", "")
    page.reload()
    expect(page.get_by_text("The site has no about page yet.")).to_be_visible()
    set_option(server, "Footer", "")
    page.reload()
    expect(page.get_by_role("contentinfo").get_by_role("link", name="About")).to_be_visible()
    expect(page.get_by_role("contentinfo").locator(".site-text")).to_have_count(0)


def test_the_logo_is_drawn_and_its_origin_alone_may_serve_images(page: Page, server: Server) -> None:
    set_option(server, "Logo", "https://cdn.example.com/brand/logo.png")
    csp = httpx.get(f"{server.url}/login").headers["content-security-policy"]
    assert "img-src 'self' blob: https://cdn.example.com;" in csp
    assert csp.replace(" https://cdn.example.com", "") == CSP
    page.goto(f"{server.url}/login")
    logo = page.get_by_role("banner").locator("img.brand-logo")
    expect(logo).to_have_attribute("src", "https://cdn.example.com/brand/logo.png")
    expect(logo).to_have_attribute("alt", "")  # the site's name follows it

    for unsafe in ("https://cdn.example.com;script-src *", "javascript:alert(1)", "/brand/logo.png"):
        set_option(server, "Logo", unsafe)
        assert httpx.get(f"{server.url}/login").headers["content-security-policy"] == CSP, unsafe
    set_option(server, "Logo", "")
    page.reload()
    expect(page.get_by_role("banner").locator("img.brand-logo")).to_be_hidden()
    assert page.get_by_role("banner").locator("img.brand-logo").get_attribute("src") is None


TAGS = ("a", "p", "b", "script", "img", "iframe", "svg", "style", "div", "form", "math", "object", "h1", "ul",
        "li", "table", "td", "template", "noscript", "textarea", "base", "meta", "link", "video")
ATTRIBUTES = ("href", "src", "onclick", "onerror", "style", "title", "id", "class", "srcdoc", "formaction",
              "xlink:href", "data-x", "rel", "target")
ADDRESSES = ("javascript:alert(1)", "JaVaScRiPt:alert(1)", " javascript:alert(1)", "data:text/html,<b>",
             "vbscript:x", "https://ok.example/", "/about", "//evil.example/", "mailto:a@b.example", "#top",
             "java\tscript:alert(1)", "&#106;avascript:alert(1)")


def fragments() -> st.SearchStrategy[str]:
    """Text shaped like hostile HTML and Markdown: tags, attributes, addresses, Markdown links, noise."""
    attribute = st.builds(lambda sep, n, v: f'{sep}{n}="{v}"', st.sampled_from((" ", "/", "\n")),
                          st.sampled_from(ATTRIBUTES), st.sampled_from(ADDRESSES))
    tag = st.builds(lambda t, attrs, inner, close: f"<{t}{''.join(attrs)}>{inner}" + ("</" + t + ">") * close,
                    st.sampled_from(TAGS), st.lists(attribute, max_size=3), st.text(max_size=8),
                    st.booleans())
    link = st.builds(lambda text, to: f"[{text}]({to})", st.text(max_size=6), st.sampled_from(ADDRESSES))
    markdown = st.sampled_from(("# ", "- ", "> ", "```\n", "**", "*", "`", "\n\n", "---\n"))
    piece = st.one_of(tag, link, markdown, st.text(max_size=10))
    return st.lists(piece, max_size=12).map("".join)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(fragments(), min_size=40, max_size=40))
def test_any_site_text_yields_only_allowed_elements_and_safe_links(page: Page, server: Server,
                                                                   texts: list[str]) -> None:
    """Whatever root writes, in either form, what reaches the page is elements of the allow-list with no
    attribute but a safe `href` (http, https, mailto, this site) and its `rel`/`target`, and `title` —
    checked in the browser, on the console's own renderer."""
    if page.url == "about:blank":
        page.goto(f"{server.url}/login")
        expect(page.get_by_role("heading", level=1, name="Sign in")).to_be_visible()
    bad = page.evaluate("""async (texts) => {
      const src = document.querySelector("script[type=module]").src.replace(/main\\.js$/, "markdown.js");
      const { markdown, html } = await import(src);
      const allowed = new Set(["A", "P", "BR", "STRONG", "B", "EM", "I", "U", "S", "SMALL", "CODE",
        "PRE", "UL", "OL", "LI", "BLOCKQUOTE", "HR", "SPAN", "DIV", "H3", "H4", "H5", "H6", "TABLE",
        "THEAD", "TBODY", "TR", "TH", "TD", "SUB", "SUP"]);
      const found = [];
      for (const text of texts) {
        for (const render of [markdown, html]) {
          const box = document.createElement("div");
          box.append(render(text));
          for (const el of box.querySelectorAll("*")) {
            if (!allowed.has(el.tagName)) found.push([text, el.tagName]);
            for (const attr of el.getAttributeNames()) {
              const value = el.getAttribute(attr) ?? "";
              const ok = attr === "title" || (el.tagName === "A" && (
                (attr === "href" && /^(https?:\\/\\/|mailto:|\\/(?!\\/)|#)/i.test(value))
                || (attr === "rel" && value === "noopener noreferrer")
                || (attr === "target" && value === "_blank")));
              if (!ok) found.push([text, `${el.tagName} ${attr}=${value}`]);
            }
          }
        }
      }
      return found.slice(0, 5);
    }""", texts)
    assert bad == []
    assert page.evaluate("window.pwned") is None
