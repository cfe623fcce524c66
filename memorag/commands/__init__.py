"""The `memorag` command line (`main`: its subcommands, `memorag --help`) and the demo (`demo`)."""
