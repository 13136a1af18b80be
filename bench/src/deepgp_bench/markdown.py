"""Text put into a Markdown table's cell."""

from __future__ import annotations

import re

_BREAK = re.compile(r"\r\n|\r|\n")


def markdown_cell(text) -> str:
    """``text`` as one Markdown cell: ``|`` escaped (``\\|``, which would end the cell) and every line break
    ``<br>`` (which would end the row)."""
    return _BREAK.sub("<br>", str(text).replace("|", "\\|"))
