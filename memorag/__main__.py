"""`python -m memorag`: the `memorag` command, for when the environment's scripts are not on PATH."""

from memorag.commands.main import main

if __name__ == "__main__":  # importing the module (e.g. walking the package) runs nothing
    raise SystemExit(main())
