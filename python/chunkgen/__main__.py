"""`python -m chunkgen ...`: the chunkgen CLI (see chunkgen._cli.main)."""
from ._cli import main

raise SystemExit(main())
