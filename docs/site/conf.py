"""Sphinx settings of the course's website (docs/website.md): built by `python scripts/build_site.py` from a
staged copy of the notebooks, the README and docs/, with no kernel run and nothing fetched from the network."""
from pathlib import Path

project = "haaw"
author = "the haaw authors"
copyright = "the haaw authors; text and figures CC BY 4.0, code MIT"

extensions = [
    "myst_nb",                 # notebooks (their stored outputs) and Markdown pages
    "sphinx-mathjax-offline",  # MathJax 3 copied into the site (_static/mathjax), so math renders offline
]
root_doc = "index"
exclude_patterns = [".doctrees"]

# MyST: $...$ and $$...$$ as math, as in the notebooks' text; headings get anchors for links within a page
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3

# MyST-NB: never run a kernel; show what the notebooks store. No ipywidgets manager (it comes from a CDN):
# the build replaces each explorer's output by a note and a launch link instead.
nb_execution_mode = "off"
nb_ipywidgets_js = {}
nb_merge_streams = False  # merged by the staging, in order: MyST-NB's merging moves a caption above its figure

html_theme = "sphinx_book_theme"
html_title = "haaw: backpropagation, built by hand"
html_static_path = ["_static"]
html_css_files = ["haaw.css"]
html_last_updated_fmt = None
html_search_scorer = str(Path(__file__).with_name("scorer.js"))  # a page with a heading that holds the whole query ranks first (scorer.js)
html_copy_source = False  # the notebook download is offered on each page: no second copy under _sources
# the reader's light/dark choice starts from the system's (the switch is in the header)
html_context = {"default_mode": "auto"}
html_theme_options = {
    "use_download_button": False,  # the page's own launch box offers the notebook download
    "use_fullscreen_button": False,
    "use_repository_button": False,
    "home_page_in_toc": True,
    "show_toc_level": 2,
}
