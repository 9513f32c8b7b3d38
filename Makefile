# `make site`: the course's website, built offline into _site/ (docs/website.md)
# `make serve-site`: the same, then served at http://127.0.0.1:8000/ (its search needs a server, not file://)
.PHONY: site serve-site
site:
	python scripts/build_site.py
serve-site:
	python scripts/build_site.py --serve
