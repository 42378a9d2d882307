"""The report's HTML, rendered from the jinja2 templates in ``evaluators/templates/``.

Autoescaping is on: algorithm names, strata, data sources, titles and every other value reach
the page as text, never as markup. The templates call the text formatting of
:mod:`evaluators.report.tables` through the filters and globals registered here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from typing import Any

import jinja2
import markupsafe

from sweval.evaluators.report.tables import (
    MetricTable,
    cell_title,
    format_delta,
    format_folds,
    format_interval,
    format_k,
    format_mean,
)
from sweval.evaluators.wording import plural

PAGE_TEMPLATE = "report.html.j2"
TABLES_TEMPLATE = "_tables.html.j2"


@cache
def environment() -> jinja2.Environment:
    """The templates of ``sweval.evaluators`` (package data, so installed wheels have them),
    autoescaped, with the report's filters."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("sweval.evaluators.report", "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    env.filters.update(format_mean=format_mean, format_delta=format_delta, format_k=format_k,
                       format_folds=format_folds, format_interval=format_interval,
                       plural=plural, repr=repr, breakable=breakable)
    env.globals.update(cell_title=cell_title)
    return env


def breakable(label: object) -> markupsafe.Markup:
    """A label, escaped, that a narrow column may break before its parameters and after each
    comma between them (``<wbr>``): ``item-knn(n_neighbors=50,weighting="cosine")`` wraps as
    ``item-knn`` / ``(n_neighbors=50,`` / ``weighting="cosine")``, never mid-word."""
    text = str(markupsafe.escape(str(label)))
    text = re.sub(r"(?<=.)([(\[])", r"<wbr>\1", text)
    return markupsafe.Markup(text.replace(",", ",<wbr>"))


def render_page(**context: Any) -> str:
    """``report.html`` from its context (see the header of ``templates/report.html.j2``)."""
    return environment().get_template(PAGE_TEMPLATE).render(**context)


def table_html(
    table: MetricTable, *, show_protocols: bool, protocols: Sequence[str] | None = None
) -> str:
    """The table (of ``protocols``, default all) as HTML: value cells carry ``data-*`` keys and
    the full-precision mean."""
    if protocols is None:
        protocols = list(dict.fromkeys(p for p, _ in table.columns))
    macros = environment().get_template(TABLES_TEMPLATE).module
    return str(macros.metric_table(table, show_protocols, list(protocols)))  # type: ignore[attr-defined]
