"""The web console: the static files of a browser application served by `tollway serve` at `/`.

The console is a client of the public API like any other (docs/CONSOLE.md); this package only serves it:
`assets.py` reads its files (package data under `static/`), `routes.py` answers its pages and files.
"""
