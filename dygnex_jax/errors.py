"""The one exception type the command line turns into a one-line message and exit code 2, and the
argument parser whose usage mistakes read the same."""

import argparse


class UserError(Exception):
    """Bad input from the user: a file, a config value, an environment setting.

    The message must be one line that names the problem and says what to do. The CLI prints
    ``error: <message>`` to stderr and exits with code 2; no traceback.
    """


def run_tool(main) -> int:
    """Run a command-line ``main()``: a ``UserError`` becomes ``error: <message>`` and exit code 2."""
    import sys

    try:
        return main()
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a usage mistake (unknown flag, bad choice, missing value) is one line,
    ``error: <what> (see --help)``, and exit code 2 like every other bad input: the CLI's and every
    tool's parser."""

    def error(self, message):
        self.exit(2, f"error: {message} (see --help)\n")
