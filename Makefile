# `make site`: the course's website, built offline into _site/ (docs/website.md)
.PHONY: site
site:
	python scripts/build_site.py
