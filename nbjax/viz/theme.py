"""Colours and fonts of the static views, as CSS values that follow the notebook's theme.

JupyterLab (and Notebook 7, and nbconvert's lab template) define ``--jp-*`` CSS variables for
the theme's colours and the user's font sizes; each value here reads one, with the light
colour we used before as the fallback for a page without them (GitHub, a saved file). So a
view is dark under JupyterLab's dark theme and grows with "Increase font size".

Every text colour reaches WCAG AA (4.5:1) on its background in JupyterLab's light and dark
themes and on a plain page (tests/test_theme_contrast.py). Two rules keep it so: text on a theme background takes the
theme's text colour, and where we paint a fixed light colour (a kernel's box, a new
equation, the Graphviz SVG) we also fix the text dark: a light *card*. Tints that must show
on both themes are translucent (``rgba``), so the theme's background shows through.
``extension/nbjax.css`` uses the same variables for the live views.
"""

FG = "var(--jp-ui-font-color1,#111827)"
MUTED = "var(--jp-ui-font-color2,#4b5563)"
BG = "var(--jp-layout-color0,#ffffff)"
BG_SOFT = "var(--jp-layout-color2,#f3f4f6)"      # table headers
CODE_BG = "var(--jp-cell-editor-background,#fafafa)"
BORDER = "var(--jp-border-color1,#d1d5db)"
BORDER_SOFT = "var(--jp-border-color2,#e5e7eb)"
UI_FONT = "var(--jp-ui-font-family,system-ui,-apple-system,'Segoe UI',sans-serif)"
UI_SIZE = "var(--jp-content-font-size1,13px)"  # views are content, not menus
CODE_FONT = "var(--jp-code-font-family,monospace)"
CODE_SIZE = "var(--jp-code-font-size,12px)"
ERROR = "var(--jp-error-color1,#dc2626)"
# Muted text on CODE_BG: JupyterLab light's --jp-ui-font-color2 on its editor background is
# 4.49:1, under WCAG AA's 4.5; its inverse layout grey is 5.7:1 there (9:1 on the dark one).
CODE_MUTED = "var(--jp-inverse-layout-color3,#4b5563)"
# How hot a source line is (the source pane): amber, translucent so the theme shows through.
HEAT = "rgba(245,158,11,{alpha:.2f})"

CARD_FG = "#111827"  # text on a fixed light colour
# A light card behind a Graphviz SVG, whose colours are fixed (and chosen for white).
GRAPH_CARD = f"background:#ffffff;color:{CARD_FG};border-radius:4px"

# Syntax colours of a printed jaxpr: JupyterLab's code editor colours of the theme.
SYNTAX = {
    "keyword": "var(--jp-mirror-editor-keyword-color,#7c3aed)",
    "primitive": "var(--jp-mirror-editor-property-color,#1d4ed8)",
    "type": "var(--jp-mirror-editor-builtin-color,#047857)",
    "literal": "var(--jp-mirror-editor-string-color,#c2410c)",
    "muted": CODE_MUTED,
    "pval": "var(--jp-mirror-editor-operator-color,#9333ea)",
}


# How much presenting (``%nbjax --present``) enlarges a view's text and graph; the live
# views receive it as their ``scale`` (extension/nbjax.css multiplies the font size by it).
PRESENT_SCALE = 1.5


def font_size(scale=1):
    """The theme's content font size, times ``scale`` (every other size is in em)."""
    return UI_SIZE if scale == 1 else f"calc({UI_SIZE} * {scale:g})"


def text_style(scale=1):
    """A view without a frame of its own (a jaxpr, a pipeline): the theme's font and text
    colour."""
    return f"font-family:{UI_FONT};font-size:{font_size(scale)};color:{FG}"



def box_style(scale=1):
    """The frame of a whole view."""
    return (f"{text_style(scale)};background:{BG};"
            f"border:1px solid {BORDER};border-radius:6px;padding:0.5em 0.8em;margin:0.3em 0")
