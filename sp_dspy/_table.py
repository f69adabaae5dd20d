"""A rich table that never loses a value on a narrow console: it stacks its rows instead.

Rich shrinks a too-wide table's columns, cutting long words; :class:`FitTable` then draws
each row as a block instead: its first cell as a heading, then ``header value`` items.
Outside a terminal (a pipe, a file, a CI log) every table is stacked, one ``header value``
item a line: the layout of a table kind never depends on its values' widths, so a script
reading the output, or a diff of two runs' outputs, sees the same shape every time.
"""

from __future__ import annotations

from rich.columns import Columns
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.padding import Padding
from rich.style import Style
from rich.table import Table
from rich.text import Text

#: Wide enough that no column is shrunk: the table's natural (unwrapped) width.
_UNBOUNDED = 1_000_000


def _text(console: Console, value: RenderableType | None, style: str = "") -> Text:
    """A cell (markup string or ``Text``) as ``Text``; other renderables by their plain rendering."""
    if value is None:
        return Text("")
    if isinstance(value, str):
        text = console.render_str(value, highlight=False)
    elif isinstance(value, Text):
        text = value.copy()
    else:
        lines = console.render_lines(value, console.options.update_width(_UNBOUNDED), pad=False)
        text = Text("\n".join("".join(segment.text for segment in line) for line in lines).rstrip())
    if style:
        text.stylize(style)
    return text


class FitTable(Table):
    """A :class:`rich.table.Table` drawn as a table when it fits, else as stacked rows."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        unbounded = options.update_width(_UNBOUNDED)
        piped = not console.is_terminal
        if (
            not self.columns
            or self.width is not None
            or (not piped and self.__rich_measure__(console, unbounded).maximum <= options.max_width)
        ):
            yield from super().__rich_console__(console, options)
            return
        if self.title:
            yield _text(console, self.title, "bold")
        columns = self.columns
        cells = [list(column.cells) for column in columns]
        headers = [_text(console, column.header, "dim") for column in columns]
        for index, row in enumerate(self.rows):
            heading = _text(console, cells[0][index], "bold")
            if row.style is not None:
                heading.stylize(console.get_style(row.style) + Style(bold=True))
            items = []
            for header, column_cells in zip(headers[1:], cells[1:], strict=True):
                item = Text.assemble(header, " ", _text(console, column_cells[index]))
                item.overflow = "fold"  # a word wider than the console folds; it is never cut
                items.append(item)
            yield heading
            # In a terminal the items fill the width; elsewhere one a line, whatever their widths.
            if piped:
                yield from (Padding(item, (0, 0, 0, 2), expand=False) for item in items)
            else:
                yield Padding(Columns(items, padding=(0, 3)), (0, 0, 0, 2))
        if self.caption:
            yield _text(console, self.caption, "dim")
