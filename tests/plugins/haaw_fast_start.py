"""A pytest plugin loaded before every other (``-p haaw_fast_start`` in pyproject.toml).

nbval imports nbformat, nbformat imports jsonschema, and jsonschema imports the optional package
rfc3987_syntax when it is installed (JupyterLab's dependencies install it). That package builds a
parser for IRIs as it is imported: 1.6 s of CPU in every pytest process, the controller and each
pytest-xdist worker. No notebook field is an IRI, so for the tests it counts as not installed and
jsonschema goes without it, as it does wherever the package is missing.
"""
import sys

sys.modules.setdefault("rfc3987_syntax", None)  # `import rfc3987_syntax` now raises ImportError
