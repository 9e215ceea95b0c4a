"""The pure core of the PCP gateway: pages, Logical Blocks, views and zoom, the reasoning trace, the XML
renderer, token counting, the budget and the zoom tools.

Standard library, lxml and tiktoken only: no IO, no asyncio, no network. Every function here is a function of
its inputs.
"""

from __future__ import annotations

from gateway.core.blocks import Block, BlockState, Event, Segmentation, split_blocks
from gateway.core.budget import (
    Candidate,
    Demotion,
    FitResult,
    Level,
    fit_context,
    fit_rendered,
    priority,
    shows_whole,
)
from gateway.core.errors import ContextWindowExceeded, CoreError, IllegalTransition, InvalidMessage
from gateway.core.extract import extract_clusters, extractive_summary, lead_text
from gateway.core.instructions import system_instructions
from gateway.core.messages import ToolCall, client_context, message_text, said_text, tool_calls_of, transcript, users_said
from gateway.core.pages import Page, PageType, consolidated_page, is_page_id, original_page, page_id, utc
from gateway.core.render import (
    LineHolds,
    NodeSpec,
    RenderInput,
    background_line,
    background_lines,
    excerpt_entry,
    iso_time,
    line_holds,
    map_text,
    nodes_from_state,
    render_context,
    render_node,
    shown_page,
    step_text,
    summary_fits_line,
    xml_safe,
)
from gateway.core.tokens import TokenCounter, encoding_for_model
from gateway.core.tools import ToolArgError, ZoomArgs, consult_schema, parse_zoom_arguments, shelve_schema
from gateway.core.trace import Step, append_steps, dropping_oldest, shown_steps, steps_for_call
from gateway.core.views import (
    PageTree,
    View,
    ViewState,
    ZoomEvent,
    ZoomResult,
    consult,
    next_view,
    normalize,
    settle,
    shelve,
    view_of,
    visible_ids,
)
from gateway.core.worth import Excerpt

__all__ = [
    "Block",
    "BlockState",
    "Candidate",
    "ContextWindowExceeded",
    "CoreError",
    "Demotion",
    "Excerpt",
    "Event",
    "FitResult",
    "IllegalTransition",
    "InvalidMessage",
    "Level",
    "NodeSpec",
    "Page",
    "PageTree",
    "PageType",
    "RenderInput",
    "Segmentation",
    "Step",
    "TokenCounter",
    "ToolArgError",
    "ToolCall",
    "View",
    "ViewState",
    "ZoomArgs",
    "ZoomEvent",
    "ZoomResult",
    "append_steps",
    "dropping_oldest",
    "background_line",
    "background_lines",
    "excerpt_entry",
    "LineHolds",
    "line_holds",
    "map_text",
    "summary_fits_line",
    "client_context",
    "consolidated_page",
    "consult",
    "consult_schema",
    "encoding_for_model",
    "extract_clusters",
    "extractive_summary",
    "fit_context",
    "fit_rendered",
    "is_page_id",
    "iso_time",
    "lead_text",
    "message_text",
    "next_view",
    "nodes_from_state",
    "normalize",
    "original_page",
    "page_id",
    "parse_zoom_arguments",
    "priority",
    "render_context",
    "render_node",
    "shown_page",
    "said_text",
    "shown_steps",
    "step_text",
    "settle",
    "shelve",
    "shelve_schema",
    "shows_whole",
    "split_blocks",
    "steps_for_call",
    "system_instructions",
    "tool_calls_of",
    "transcript",
    "users_said",
    "utc",
    "view_of",
    "visible_ids",
    "xml_safe",
]
