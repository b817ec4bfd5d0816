"""``python -m lblab``: the same as the ``lblab`` command."""

from lblab.cli import main

main()
