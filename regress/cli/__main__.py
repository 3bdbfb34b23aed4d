"""`python -m regress.cli`."""

from regress.cli import main

main()
