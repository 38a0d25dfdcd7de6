"""`python -m moldau` runs the `moldau` command line."""

from moldau.cli.main import main

if __name__ == "__main__":
    main()
