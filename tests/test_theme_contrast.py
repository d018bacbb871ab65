"""Every text colour of the views against the background it is drawn on, by WCAG 2's
contrast ratio (AA asks 4.5:1 for normal text), wherever a view is drawn: a page without
JupyterLab's variables (the fallbacks), JupyterLab's light theme and its dark theme (their
``--jp-*`` values read from the installed JupyterLab, which Notebook 7 shares).

The live views' pairs come from ``extension/nbjax.css`` itself: each rule that sets a text
colour or a background pairs its colour (or the view's) with its background (or the
view's), translucent tints composited over the view's background; the static views' pairs
are the ones ``nbjax.viz.theme``'s constants are used in. The browser tests measure the
rendered pages; this checks the colours themselves, in every theme, without a browser.
"""

import re
from pathlib import Path

import pytest
from helpers import jupyterlab_theme_css

from nbjax.notebook.static import heat
from nbjax.viz import theme
from nbjax.viz.dot import KERNEL_COLOURS, PHASE_FILL
from nbjax.viz.pipeline import NEW_FILL, OTHER_NEW_FILL

AA = 4.5
CSS = Path(__file__).resolve().parents[1] / "extension" / "nbjax.css"
NAMED = {"white": "#ffffff", "black": "#000000", "green": "#008000", "red": "#ff0000",
         "blue": "#0000ff", "transparent": "rgba(0,0,0,0)", "none": "rgba(0,0,0,0)"}


# --- colours --------------------------------------------------------------------------------

def parse_colour(text):
    """(r, g, b, alpha) of a CSS colour: #rgb, #rrggbb, rgb()/rgba(), or a name used here."""
    text = NAMED.get(text.strip().lower(), text.strip())
    if text.startswith("#"):
        digits = text[1:]
        if len(digits) == 3:
            digits = "".join(d * 2 for d in digits)
        return tuple(int(digits[i:i + 2], 16) for i in (0, 2, 4)) + (1.0,)
    match = re.fullmatch(r"rgba?\(([^)]*)\)", text)
    assert match, f"not a colour this test reads: {text!r}"
    parts = [float(p) for p in re.split(r"[\s,/]+", match.group(1).strip())]
    return tuple(parts[:3]) + (parts[3] if len(parts) == 4 else 1.0,)


def over(top, below):
    """``top`` composited over the opaque ``below``."""
    alpha = top[3]
    return tuple(alpha * t + (1 - alpha) * b for t, b in zip(top[:3], below[:3])) + (1.0,)


def luminance(colour):
    def linear(channel):
        c = channel / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = map(linear, colour[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(text, background):
    """WCAG's ratio of a text colour (composited over its background) to the background."""
    lighter, darker = sorted((luminance(over(text, background)), luminance(background)),
                             reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


def test_contrast_matches_wcag_reference_values():
    white, black = parse_colour("#fff"), parse_colour("black")
    assert contrast(black, white) == pytest.approx(21.0)
    assert contrast(white, white) == pytest.approx(1.0)
    assert contrast(parse_colour("#777777"), white) == pytest.approx(4.48, abs=0.01)
    assert contrast(parse_colour("#e65100"), white) == pytest.approx(3.79, abs=0.01)
    # half-transparent black on white is the grey it shows
    assert contrast(parse_colour("rgba(0, 0, 0, 0.5)"), white) == pytest.approx(
        contrast(parse_colour("rgb(127.5, 127.5, 127.5)"), white))


# --- CSS variables ---------------------------------------------------------------------------

def resolve(value, variables):
    """``value`` with every ``var(--name, fallback)`` replaced, innermost first, by the
    variable's value, or the fallback when the page does not define it."""
    start = value.find("var(")
    if start < 0:
        return value.strip()
    depth, i = 0, start + 3
    comma = None
    while True:
        depth += {"(": 1, ")": -1}.get(value[i], 0)
        if value[i] == "," and depth == 1 and comma is None:
            comma = i
        if depth == 0:
            break
        i += 1
    name = value[start + 4:comma if comma is not None else i].strip()
    fallback = value[comma + 1:i] if comma is not None else ""
    found = variables.get(name)
    replacement = resolve(found, variables) if found is not None else resolve(fallback,
                                                                               variables)
    return resolve(value[:start] + replacement + value[i + 1:], variables)


def declarations(block):
    return {k.strip(): v.strip() for k, v in
            (d.split(":", 1) for d in block.split(";") if ":" in d)}


def css_rules(text):
    """[(selector, {property: value})] of a stylesheet without nested blocks."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return [(sel.strip(), declarations(body)) for sel, body in
            re.findall(r"([^{}]+)\{([^{}]*)\}", text)]


def jupyterlab_variables(name):
    """The ``--jp-*`` (and ``--md-*``) variables of one of JupyterLab's installed themes."""
    variables = {}
    for _, decls in css_rules(jupyterlab_theme_css(name)):
        for key, value in decls.items():
            if key.startswith("--"):
                variables.setdefault(key, value)
    return variables


THEMES = ("page", "light", "dark")  # no JupyterLab variables; JupyterLab light; dark


def page_variables(name):
    """The variables a view sees: the theme's, then nbjax.css's own (``.nbjax-root``, and
    the dark theme's override, which JupyterLab's ``data-jp-theme-light="false"`` on
    <body> selects)."""
    variables = {} if name == "page" else jupyterlab_variables(name)
    for selector, decls in css_rules(CSS.read_text()):
        dark_only = selector.startswith('[data-jp-theme-light="false"]')
        if selector.endswith(".nbjax-root") and (name == "dark" or not dark_only):
            variables.update({k: v for k, v in decls.items() if k.startswith("--")})
    return variables


def colour(value, variables):
    return parse_colour(resolve(value, variables))


# --- the live views (extension/nbjax.css) ---------------------------------------------------

def live_pairs(name):
    """(selector, text colour, background) of every rule of nbjax.css that sets either,
    the other one inherited from the view (the root); a ``:hover`` rule's text is that of
    the rule it hovers (``.nbjax-tab:hover``: the tab's colour) unless it sets its own."""
    variables = page_variables(name)
    rules = css_rules(CSS.read_text())
    root = next(d for s, d in rules if s == ".nbjax-root")
    root_bg = colour(root["background"], variables)
    assert root_bg[3] == 1.0, "the view's background is opaque"
    pairs = [(".nbjax-root", colour(root["color"], variables), root_bg)]
    by_selector = dict(rules)
    for selector, decls in rules:
        if selector == ".nbjax-root" or not selector.startswith(".nbjax-root "):
            continue
        background = decls.get("background", decls.get("background-color"))
        if "color" not in decls and background is None:
            continue
        hovered = by_selector.get(selector.replace(":hover", ""), {})
        fg = colour(decls.get("color", hovered.get("color", root["color"])), variables)
        bg = over(colour(background, variables), root_bg) if background else root_bg
        pairs.append((selector, fg, bg))
    return pairs


@pytest.mark.parametrize("name", THEMES)
def test_every_text_colour_of_the_live_views_reaches_aa(name):
    pairs = live_pairs(name)
    assert len(pairs) > 20  # the rules were read
    low = {sel: round(contrast(fg, bg), 2) for sel, fg, bg in pairs if contrast(fg, bg) < AA}
    assert low == {}, f"{name}: below {AA}:1"


def test_the_backward_heading_follows_the_theme_above_aa():
    """The backward pass's orange: JupyterLab light's own warning orange (#e65100) reads
    3.8:1 on white, so the light views use a darker orange; the dark theme's is kept."""
    heading = {name: dict((s, (fg, bg)) for s, fg, bg in live_pairs(name))[
        ".nbjax-root .nbjax-column-right h4"] for name in THEMES}
    light_warn = colour("var(--jp-warn-color0)", jupyterlab_variables("light"))
    assert contrast(light_warn, parse_colour("white")) < AA  # the theme's own would fail
    for name, (fg, bg) in heading.items():
        assert fg[0] > fg[2] + 100, f"{name}: still an orange"
        assert contrast(fg, bg) >= AA, name
    dark = jupyterlab_variables("dark")
    assert heading["dark"][0] == colour("var(--jp-warn-color0)", dark)


# --- the static views (nbjax.viz.theme) -----------------------------------------------------

def static_pairs(name):
    """(where, text, background) of the static renderings' colours: text on the view's
    background, table headers, code blocks (jaxpr syntax colours included), and the fixed
    light cards (graphs, new equations, kernels' boxes) with their fixed dark text."""
    variables = {} if name == "page" else jupyterlab_variables(name)
    c = lambda value: colour(value, variables)  # noqa: E731
    bg, soft, code = c(theme.BG), c(theme.BG_SOFT), c(theme.CODE_BG)
    pairs = [("text", c(theme.FG), bg), ("table header", c(theme.FG), soft),
             ("code", c(theme.FG), code), ("note", c(theme.MUTED), bg),
             ("muted code", c(theme.CODE_MUTED), code), ("error", c(theme.ERROR), bg)]
    pairs += [(f"jaxpr {kind}", c(value), code) for kind, value in theme.SYNTAX.items()]
    hottest = heat(1.0).removeprefix("background:")  # a source line with all the time
    pairs.append(("hottest source line", c(theme.FG), over(parse_colour(hottest), bg)))
    cards = ["#ffffff", OTHER_NEW_FILL, *PHASE_FILL.values(), *NEW_FILL.values(),
             *(fill for _, fill in KERNEL_COLOURS)]
    pairs += [(f"card {fill}", parse_colour(theme.CARD_FG), parse_colour(fill))
              for fill in cards if isinstance(fill, str)]
    return pairs


@pytest.mark.parametrize("name", THEMES)
def test_every_text_colour_of_the_static_views_reaches_aa(name):
    low = {where: round(contrast(fg, bg), 2) for where, fg, bg in static_pairs(name)
           if contrast(fg, bg) < AA}
    assert low == {}, f"{name}: below {AA}:1"


def test_kernel_labels_in_graphs_reach_aa():
    """A fusion kernel's cluster is labelled in its border colour on its fill (the graph is
    a light card in every theme)."""
    low = {border: round(contrast(parse_colour(border), parse_colour(fill)), 2)
           for border, fill in KERNEL_COLOURS
           if contrast(parse_colour(border), parse_colour(fill)) < AA}
    assert low == {}
