"""The `moldau` command line: one module per command group, registered on `main.app`."""
