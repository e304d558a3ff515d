"""The ``lakecore`` command line (``main``) and its maintenance subcommands."""
