"""`python -m memorag`: the `memorag` command, for when the environment's scripts are not on PATH."""

from memorag.cli import main

raise SystemExit(main())
