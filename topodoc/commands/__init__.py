"""One module per CLI command; each defines ``command`` (a click.Command). See topodoc.cli."""
