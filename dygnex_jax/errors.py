"""The one exception type the command line turns into a one-line message and exit code 2, and the
argument parser whose usage mistakes read the same."""

import argparse


class UserError(Exception):
    """Bad input from the user: a file, a config value, an environment setting.

    The message must be one line that names the problem and says what to do. The CLI prints
    ``error: <message>`` to stderr and exits with code 2; no traceback.
    """


def os_error_line(e: OSError) -> str:
    """The one line for a file-system fault the code did not anticipate (a full disk while writing a
    plot, a folder that vanished, an I/O error): what failed on which path, and what to do."""
    where = f"{e.filename!r}: " if e.filename else ""
    what = e.strerror or " ".join(str(e).split()) or type(e).__name__
    return f"error: {where}{what}: free space or fix the path and its permissions there, then run again"


def run_tool(main) -> int:
    """Run a command-line ``main()``: a ``UserError`` becomes ``error: <message>`` and exit code 2, as
    does an unanticipated file-system fault (``os_error_line``); a reader that closed stdout (``| head``)
    ends it quietly with 141, as a shell tool does."""
    import os
    import sys

    try:
        return main()
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 141
    except OSError as e:
        print(os_error_line(e), file=sys.stderr)
        return 2


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a usage mistake (unknown flag, bad choice, missing value) is one line,
    ``error: <what> (see --help)``, and exit code 2 like every other bad input: the CLI's and every
    tool's parser."""

    def error(self, message):
        self.exit(2, f"error: {message} (see --help)\n")
