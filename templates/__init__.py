"""Jinja2 templates of the HTML reports (shipped inside the installed package)."""
