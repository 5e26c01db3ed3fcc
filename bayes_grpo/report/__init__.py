"""The self-contained HTML report (Jinja2 template, ArviZ and matplotlib figures)."""

from bayes_grpo.report.build import (
    SECTION_KEYS,
    build_sections,
    overview_notes,
    render_html,
    section_verdicts,
    write_report,
)

__all__ = ["SECTION_KEYS", "build_sections", "overview_notes", "render_html", "section_verdicts", "write_report"]
