"""``python -m services.cli``: the ``claimlog`` command."""

from services.cli import main

main()
