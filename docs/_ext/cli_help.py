"""MkDocs hook: the "Command line" page is generated from deepgp's own argparse parser at build time.

``docs/cli.md`` holds the marker ``<!-- deepgp-cli-help -->``; it is replaced by one section per
command (and per sub-command of ``deepgp plot``) with that command's ``--help`` text, exactly as
``deepgp <command> --help`` prints it at 100 columns. Nothing is stored in the page, so it never
goes stale when an option changes. (mkdocs-click only reads click applications; deepgp uses argparse.)
"""

from __future__ import annotations

import argparse
import os

MARKER = "<!-- deepgp-cli-help -->"
WIDTH = "100"


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse has no public accessor for sub-parsers
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _sections(parser: argparse.ArgumentParser, depth: int) -> list[str]:
    out = [f"{'#' * depth} `{parser.prog}`", "", "```text", parser.format_help().rstrip(), "```", ""]
    for child in _subcommands(parser).values():
        out += _sections(child, depth + 1)
    return out


def cli_reference() -> str:
    from deepgp.cli import build_parser, plugins

    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH  # argparse wraps to the terminal width: fix it for a stable page
    try:
        parser = build_parser(load={p.name for p in plugins()})  # the added commands' options too
        top = ["## `deepgp`", "", "```text", parser.format_help().rstrip(), "```", ""]
        return "\n".join(top + [line for command in _subcommands(parser).values() for line in _sections(command, 2)])
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved


def on_page_markdown(markdown: str, page, config, files) -> str:
    if page.file.src_uri != "cli.md":
        return markdown
    if MARKER not in markdown:
        raise ValueError(f"docs/cli.md lost its marker {MARKER}")
    return markdown.replace(MARKER, cli_reference())
