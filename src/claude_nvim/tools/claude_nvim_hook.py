"""claude_nvim_hook: the Claude Code hooks claude-nvim gives the claudes it starts (hidden, IDE
only). Each arrives on the IDE connection of the claude it comes from: its state changes, and
the review keeps what a file tool is about to change (``_hooks``)."""

from __future__ import annotations

from .._hooks import TOOL as NAME
from .._hooks import HookEvent
from .._paths import OutsideMap
from .._tool import IDE, JSON, Register, Tool, ToolContext, ToolResult, text_result
from ..hookspecs import hookimpl
from ._context import builtin


async def claude_nvim_hook(ctx: ToolContext, args: JSON) -> ToolResult:
    event = HookEvent.from_arguments(args)
    if event.path:
        try:  # with a path map, a file the far side may not touch is dropped from the event
            event.path = ctx.paths.claude_path(event.path)
        except OutsideMap as why:
            ctx.log.warning("hook %s of %s: its file refused, nothing recorded: %s", event.name,
                            ctx.connection.label or ctx.connection.id, why)
            event.path = ""
    await builtin(ctx).hooks.receive(ctx.connection.id, event)
    # claude reads a hook's text as its output: an empty JSON object asks for nothing (plain
    # text would be context added to the prompt, for UserPromptSubmit).
    return text_result("{}")


TEXT = {"type": "string"}
TOOL = Tool(
    name=NAME,
    description=None,  # claude's hooks call it; the model never sees it
    input_schema={
        "type": "object",
        "properties": {"event": TEXT, "session": TEXT, "tool": TEXT, "file": TEXT,
                       "notebook": TEXT, "tool_use": TEXT, "prompt": TEXT, "type": TEXT,
                       "interrupt": TEXT, "transcript": TEXT},
        "required": ["event"],
    },
    handler=claude_nvim_hook,
    exposure=IDE,
)


@hookimpl
def claude_nvim_register_tools(register: Register) -> None:
    register(TOOL)
