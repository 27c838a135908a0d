"""claude_nvim_plan: a Claude asks to leave plan mode (the PermissionRequest hook of
ExitPlanMode, hidden, IDE only): its plan opens in a Markdown buffer in Neovim and the user
answers there (``claude_nvim_plan.lua``): :ClaudeNvimPlanApprove [mode] approves, comments
written in the buffer and sent with :w send Claude back to planning with them, :q leaves it to
claude's own dialog. The answer is the hook's output, as claude reads it."""

from __future__ import annotations

from .._errors import ToolError
from .._hooks import PLAN_TIMEOUT_SECONDS
from .._hooks import PLAN_TOOL as NAME
from .._nvim.lua import read_lua
from .._tool import IDE, JSON, Register, Tool, ToolContext, ToolResult, text_result
from .._wire import jsontext
from ..hookspecs import hookimpl
from ._context import builtin

MAX_PLAN_BYTES = 1 << 20
"""A plan longer than this is not shown (claude's own dialog has it)."""
MODES = ("default", "acceptEdits", "auto", "bypassPermissions")
"""The modes a plan may be approved into (claude's dialog offers them)."""
NOTHING = "{}"
"""The hook asks for nothing: claude shows its own dialog."""


def decision(verdict: JSON, tool_input: JSON) -> str:
    """The hook's output for the user's ``verdict`` (from Lua): approve (into ``mode``), send
    back ``message``, or nothing. An approval carries the tool's input (``tool_input``, as the
    hook got it): claude 2.1.332 lets a hook allow a tool that asks the user (ExitPlanMode)
    only with its input given back; without it, its own dialog stays."""
    how = verdict.get("verdict")
    if how == "approve":
        allow: JSON = {"behavior": "allow", "updatedInput": tool_input}
        mode = verdict.get("mode")
        if isinstance(mode, str) and mode in MODES:
            allow["updatedPermissions"] = [{"type": "setMode", "mode": mode,
                                            "destination": "session"}]
        chosen = allow
    elif how == "comment" and isinstance(verdict.get("message"), str):
        chosen = {"behavior": "deny", "message": verdict["message"]}
    else:
        return NOTHING
    return jsontext.dumps({"hookSpecificOutput": {"hookEventName": "PermissionRequest",
                                                  "decision": chosen}}).decode()


async def claude_nvim_plan(ctx: ToolContext, args: JSON) -> ToolResult:
    plan = args.get("plan")
    if not isinstance(plan, str) or not plan.strip() or len(plan) > MAX_PLAN_BYTES:
        return text_result(NOTHING)
    built_in = builtin(ctx)
    label = ctx.connection.label or "Claude"
    try:
        verdict = await built_in.replies.call(ctx.editor, ctx.tool.lua_module, "review", plan,
                                              label, list(MODES), timeout=PLAN_TIMEOUT_SECONDS)
    except ToolError:  # no answer in time: claude's own dialog asks
        return text_result(NOTHING)
    tool_input: JSON = {"plan": plan}
    if isinstance(args.get("file"), str) and args["file"]:
        tool_input["planFilePath"] = args["file"]
    return text_result(decision(verdict if isinstance(verdict, dict) else {}, tool_input))


TEXT = {"type": "string"}
TOOL = Tool(
    name=NAME,
    description=None,  # claude's hooks call it; the model never sees it
    input_schema={"type": "object", "properties": {"plan": TEXT, "file": TEXT}},
    handler=claude_nvim_plan,
    lua=read_lua(__package__, "claude_nvim_plan.lua"),
    exposure=IDE,
)


@hookimpl
def claude_nvim_register_tools(register: Register) -> None:
    register(TOOL)
