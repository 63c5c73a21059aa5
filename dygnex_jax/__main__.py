"""Command line: ``python -m dygnex_jax train --config configs/X.yaml [key=value ...] [--out DIR]``.

Thin by design: parse, load the config, call the library. Bad input (``UserError``) prints one line
``error: ...`` on stderr and exits with code 2.
"""

from __future__ import annotations

import argparse
import sys

from .errors import UserError


class _Parser(argparse.ArgumentParser):
    """argparse, but usage mistakes are one line and exit code 2 like every other bad input."""

    def error(self, message):
        self.exit(2, f"error: {message} (see --help)\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m dygnex_jax", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    train = sub.add_parser("train", help="train a DGNN on all local devices")
    train.add_argument("--config", help="YAML config (default: the embedded synthetic default)")
    train.add_argument("--out", help="output directory (default runs/<name>-<time>)")
    train.add_argument(
        "overrides", nargs="*", metavar="key=value", help="config overrides, e.g. train.epochs=3"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        from .config import load_config

        config = load_config(args.config, args.overrides)
        if args.command == "train":
            from .train import train_and_evaluate

            train_and_evaluate(config, args.out)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
