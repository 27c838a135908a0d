"""The LSP tools against a real language server (pylsp) in a real headless Neovim.

One Neovim and one pylsp serve the whole module (pylsp takes about a second to start); each
test gets its own claude-nvim server and model-endpoint client on that Neovim. What pylsp
cannot do (workspace symbols, other position encodings, never answering) is played by a
small in-process language server written in Lua.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import trio

from claude_nvim._nvim.headless import headless_nvim
from claude_nvim._paths import PathMap
from claude_nvim._wire.constants import MODEL_PATH
from claude_nvim.testing import mcp_client, model_client_of, running_app
from claude_nvim.tools import _lsp_tools as lsp
from claude_nvim.tools import lsp_document_symbols, lsp_hover, lsp_references
from helpers import WAIT, call, edit, error

PYLSP = Path(sys.executable).parent / "pylsp"

MODELS = '''\
class Cart:
    """A shopping cart."""

    def __init__(self):
        self.items = []

    def add(self, item):
        """Add one item."""
        self.items.append(item)


def total(cart):
    """How many items the cart holds."""
    return len(cart.items)
'''

MAIN = '''\
from models import Cart, total

cart = Cart()
cart.add("apple")
label = "héllo wörld"; n = total(cart)
'''

# Starts pylsp for every Python buffer, rooted at the project (Neovim's cwd).
SETUP = """
vim.api.nvim_create_autocmd('FileType', {
  pattern = 'python',
  callback = function(args)
    vim.lsp.start({ name = 'pylsp', cmd = { PYLSP }, root_dir = vim.fn.getcwd() },
                  { bufnr = args.buf })
  end,
})
""".replace("PYLSP", json.dumps(str(PYLSP)))


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("project")
    (root / "models.py").write_text(MODELS)
    (root / "main.py").write_text(MAIN)
    (root / "notes.txt").write_text("no language server here\n")
    (root / "setup.lua").write_text(SETUP)
    return root


@pytest.fixture(scope="module")
def nvim_address(project: Path):
    """One Neovim (and so one pylsp) for the whole module, in the project directory."""
    assert PYLSP.exists(), f"pylsp is not installed next to {sys.executable}"
    args = ("--clean", "--cmd", "let g:loaded_python3_provider = 0",
            "--cmd", f"luafile {project / 'setup.lua'}")
    with headless_nvim(cwd=project, args=args) as (address, _process):
        yield address


async def wait_for_client(nvim, path, name="pylsp", timeout=WAIT):
    """Wait until the language server `name` is attached to `path` and initialized."""
    code = """
      local path, name = ...
      for _, buf in ipairs(vim.api.nvim_list_bufs()) do
        if vim.api.nvim_buf_get_name(buf) == path then
          return #vim.lsp.get_clients({ bufnr = buf, name = name }) > 0
        end
      end
      return false
    """
    with trio.fail_after(timeout):
        while not await nvim.exec_lua(code, str(path), name):
            await trio.sleep(0.02)


def at(text: str, needle: str, nth: int = 0) -> dict:
    """The 0-based position (UTF-16 character) of the `nth` occurrence of `needle`."""
    index = -1
    for _ in range(nth + 1):
        index = text.index(needle, index + 1)
    line = text.count("\n", 0, index)
    column = text[text.rfind("\n", 0, index) + 1:index]
    return {"line": line, "character": len(column.encode("utf-16-le")) // 2}


def span(text: str, needle: str, nth: int = 0) -> dict:
    start = at(text, needle, nth)
    return {"start": start, "end": {**start, "character": start["character"] + len(needle)}}


def url(path: Path) -> str:
    return f"file://{path}"


# pylsp: definition, references, hover, document symbols


async def test_definition_across_files(model, nvim, project):
    main = project / "main.py"
    await edit(nvim, main)
    answer = await call(model, "lspDefinition", {"filePath": str(main), **at(MAIN, "Cart()")})
    assert answer == {"locations": [{
        "uri": url(project / "models.py"),
        "range": span(MODELS, "Cart"),
        "text": "class Cart:",
    }]}



async def test_references_are_sorted_with_utf16_columns(model, nvim, project):
    main, models = project / "main.py", project / "models.py"
    await edit(nvim, main)
    where = {"filePath": str(main), **at(MAIN, "total", 1)}
    answer = await call(model, "lspReferences", where)
    assert answer == {"locations": [
        {"uri": url(main), "range": span(MAIN, "total"),
         "text": "from models import Cart, total"},
        # After "é" and "ö": characters, not bytes (29 bytes in, 27 UTF-16 code units).
        # (pylsp counts code points, so astral characters are left to the Lua server.)
        {"uri": url(main), "range": span(MAIN, "total", 1),
         "text": 'label = "héllo wörld"; n = total(cart)'},
        {"uri": url(models), "range": span(MODELS, "total"), "text": "def total(cart):"},
    ]}
    assert answer["locations"][1]["range"]["start"]["character"] == 27
    without = await call(model, "lspReferences", {**where, "includeDeclaration": False})
    assert url(models) not in {loc["uri"] for loc in without["locations"]}


async def test_hover_is_markdown(model, nvim, project):
    main = project / "main.py"
    await edit(nvim, main)
    answer = await call(model, "lspHover", {"filePath": str(main), **at(MAIN, "total", 1)})
    assert set(answer) <= {"contents", "range"}
    assert answer["contents"].startswith("```python\ntotal(cart)")
    assert "How many items the cart holds." in answer["contents"]
    blank = await call(model, "lspHover", {"filePath": str(main), "line": 1, "character": 0})
    assert blank == {"contents": ""}


async def test_document_symbols_are_flattened_with_kinds_and_containers(model, nvim, project):
    models = project / "models.py"
    await edit(nvim, models)
    answer = await call(model, "lspDocumentSymbols", {"filePath": f"file://{models}"})
    assert answer["uri"] == url(models)
    by_name = {s["name"]: s for s in answer["symbols"]}
    assert by_name["Cart"]["kind"] == "Class" and "containerName" not in by_name["Cart"]
    assert by_name["add"] == {"name": "add", "kind": "Method", "containerName": "Cart",
                              "range": {"start": {"line": 6, "character": 4},
                                        "end": {"line": 9, "character": 0}}}
    assert by_name["total"]["kind"] == "Function"
    assert list(by_name["total"]) == ["name", "kind", "range"]  # a stable, readable key order


async def test_unsaved_changes_are_what_the_server_sees(model, nvim, project):
    main = project / "main.py"
    await edit(nvim, main)
    await nvim.request("nvim_buf_set_lines", 0, 0, 0, False, ["import os", "", ""])
    try:
        edited = "import os\n\n\n" + MAIN
        answer = await call(model, "lspReferences",
                            {"filePath": str(main), **at(edited, "total", 1)})
        assert [loc["range"]["start"]["line"] for loc in answer["locations"]] == [3, 7, 11]
    finally:
        await nvim.request("nvim_command", "silent edit!")


async def test_a_file_not_open_is_loaded_into_a_hidden_buffer(model, nvim, project):
    extra = project / "extra.py"
    extra.write_text("def helper():\n    return 1\n")
    answer = await call(model, "lspDocumentSymbols", {"filePath": "extra.py"})  # relative
    assert answer == {"uri": url(extra), "symbols": [{
        "name": "helper", "kind": "Function",
        "range": {"start": {"line": 0, "character": 0}, "end": {"line": 2, "character": 0}},
    }]}
    listed = await nvim.exec_lua(
        "return vim.bo[vim.fn.bufnr(...)].buflisted", str(extra))
    assert listed is False  # not among the user's buffers
    editors = await model.call_json("getOpenEditors")
    assert url(extra) not in {tab["uri"] for tab in editors["tabs"]}


async def test_no_language_server_attached(nvim_address, nvim, project, tmp_path):
    notes = project / "notes.txt"
    await edit(nvim, notes)
    where = {"filePath": str(notes), "line": 0, "character": 0}
    # A file the tool loads itself gets a moment for a server to attach: 0.2 s here.
    hover = lsp_hover.make_tool(lsp.Limits(fresh_wait=0.2))
    async with model_client_of(nvim_address, tmp_path / "ide", hover) as model:
        for tool in ("lspDefinition", "lspReferences", "lspHover"):
            assert await error(model, tool, where) == (
                f"No language server is attached to {notes}")
        assert await error(model, "lspDocumentSymbols", {"filePath": str(notes)}) == (
            f"No language server is attached to {notes}")
        other = project / "other.txt"
        other.write_text("plain\n")
        with trio.fail_after(WAIT):
            message = await error(model, "lspHover", {**where, "filePath": str(other)})
    assert message == f"No language server is attached to {other}"


async def test_a_method_the_server_lacks(model, nvim, project):
    main = project / "main.py"
    await edit(nvim, main)
    await wait_for_client(nvim, main)
    assert await error(model, "lspWorkspaceSymbols", {"query": "Cart"}) == (
        "No language server running in Neovim supports workspace/symbol (running: pylsp)")
    assert await error(model, "lspWorkspaceSymbols", {"query": "Cart", "filePath": str(main)}) == (
        f"No language server attached to {main} supports workspace/symbol (attached: pylsp)")


async def test_bad_arguments_name_the_argument(model, nvim, project):
    main = project / "main.py"
    await edit(nvim, main)
    cases = [
        ("lspDefinition", {"filePath": str(main), "line": 0},
         "missing required argument 'character'"),
        ("lspHover", {"line": 0, "character": 0}, "missing required argument 'filePath'"),
        ("lspReferences", {"filePath": str(main), "line": "2", "character": 0},
         "'line' must be of type integer"),
        ("lspHover", {"filePath": str(main), "line": 0, "character": -1},
         "'character' must be at least 0"),
        ("lspHover", {"filePath": str(main), "line": 2**63, "character": 0},
         "'line' must be at most 2147483647"),
        ("lspReferences", {"filePath": str(main), "line": 0, "character": 0,
                           "includeDeclaration": "yes"}, "'includeDeclaration' must be of type"),
        ("lspDocumentSymbols", {"filePath": " "}, "'filePath' must not be empty"),
        ("lspWorkspaceSymbols", {}, "missing required argument 'query'"),
        ("lspDefinition", {"filePath": str(main), "line": 99, "character": 0},
         f"'line' 99 is past the end of {main} (5 lines)"),
        ("lspDefinition", {"filePath": str(project / "missing.py"), "line": 0, "character": 0},
         f"No such file: {project / 'missing.py'}"),
        ("lspDocumentSymbols", {"filePath": str(project)},
         f"{project} is not a regular file (a directory)"),
    ]
    for tool, arguments, expected in cases:
        message = await error(model, tool, arguments)
        assert expected in message, (tool, arguments, message)


@pytest.mark.usefixtures("one_mb_file_limit")
async def test_files_that_would_block_or_swamp_neovim_are_refused(model, nvim, fifo, big_file):
    with trio.fail_after(WAIT):
        message = await error(model, "lspDocumentSymbols", {"filePath": str(fifo)})
    assert message == f"{fifo} is not a regular file (a FIFO)"
    message = await error(model, "lspHover", {"filePath": str(big_file), "line": 0,
                                              "character": 0})
    assert message == (f"{big_file} is 1.5 MB, over claude-nvim's limit of 1 MB for opening "
                       "files (CLAUDE_NVIM_MAX_FILE_MB)")
    assert await nvim.exec_lua("local a, b = ...; return {vim.fn.bufnr(a), vim.fn.bufnr(b)}",
                               str(fifo), str(big_file), timeout=WAIT) == [-1, -1]


async def test_a_bad_modeline_does_not_fail_the_request(model, nvim, tmp_path):
    path = tmp_path / "modeline.txt"
    path.write_text("text\n# vim: set nosuchoption:\n")
    await nvim.request("nvim_command", "set modeline")  # the default, but not under --clean
    try:
        message = await error(model, "lspDocumentSymbols", {"filePath": str(path)})
    finally:
        await nvim.request("nvim_command", "set nomodeline")
    assert message == f"No language server is attached to {path}"  # as for any text file
    assert await nvim.exec_lua("return vim.api.nvim_buf_is_loaded(vim.fn.bufnr(...))", str(path))


async def test_answers_are_capped(nvim_address, nvim, project, tmp_path):
    main, models = project / "main.py", project / "models.py"
    await edit(nvim, main)
    small = lsp.Limits(max_locations=2, max_symbols=2, max_hover_bytes=12)
    tools = [module.make_tool(small) for module in (lsp_references, lsp_document_symbols,
                                                    lsp_hover)]
    async with model_client_of(nvim_address, tmp_path / "ide", *tools) as model:
        answer = await call(model, "lspReferences",
                            {"filePath": str(main), **at(MAIN, "total", 1)})
        assert len(answer["locations"]) == 2 and answer["truncated"] is True
        assert answer["total"] == 3
        answer = await call(model, "lspDocumentSymbols", {"filePath": str(models)})
        assert [s["name"] for s in answer["symbols"]] == ["Cart", "__init__"]
        assert answer["truncated"] is True and answer["total"] == 5
        answer = await call(model, "lspHover", {"filePath": str(main), **at(MAIN, "total", 1)})
        assert answer["contents"] == "```python\nto" and answer["truncated"] is True


async def test_the_tools_are_model_tools(app, model):
    from claude_nvim.testing import mcp_client as connect

    names = ["lspDefinition", "lspReferences", "lspHover", "lspDocumentSymbols",
             "lspWorkspaceSymbols"]
    listed = {t["name"]: t for t in (await model.result("tools/list"))["tools"]}
    for name in names:
        assert listed[name]["annotations"]["readOnlyHint"] is True
        assert listed[name]["annotations"]["openWorldHint"] is False
    async with connect(app.port, app.token) as ide:
        ide_names = {t["name"] for t in (await ide.result("tools/list"))["tools"]}
    assert not ide_names & set(names)


async def test_the_tools_share_one_copy_of_the_lsp_lua(app, nvim):
    # One module, one table of pending requests: each tool's module only adds its M.run.
    shared = await nvim.exec_lua("""
        local lsp, shared = package.loaded['claude_nvim.lsp'], 0
        for _, name in ipairs({'lspDefinition', 'lspReferences', 'lspHover',
                               'lspDocumentSymbols', 'lspWorkspaceSymbols'}) do
          local m = package.loaded['claude_nvim.tools.' .. name]
          if lsp and m.cancel == lsp.cancel and m.stop == nil then shared = shared + 1 end
        end
        return shared""")
    assert shared == 5


# A language server in Lua, inside Neovim, for what pylsp does not do.

FAKE_SERVER = """
-- The config of the fake server `name` for `path`; its calls are logged in _G.fake_calls.
function _G.fake_config(name, path, opts)
_G.fake_calls = _G.fake_calls or {}
_G.fake_calls[name] = {}
local function log(method, params)
  table.insert(_G.fake_calls[name], { method = method, params = params })
end
local function server(dispatchers)
  local closing, last = false, 0
  return {
    request = function(method, params, callback, notify_reply)
      last = last + 1
      local id = last
      log(method, params)
      local function respond(err, result, delay)
        vim.defer_fn(function()
          callback(err, result)
          if notify_reply then notify_reply(id) end
        end, delay or 0)
      end
      if method == 'initialize' then
        if opts.init_delay >= 0 then
          respond(nil, { capabilities = opts.capabilities }, opts.init_delay)
        end
      elseif method == 'shutdown' then
        respond(nil, vim.NIL)
      elseif method == 'textDocument/definition' then
        callback({ code = -32603, message = 'definition exploded' }, nil)  -- at once
        if notify_reply then notify_reply(id) end
      elseif method == 'textDocument/references' then
        local p = params.position
        respond(nil, { { uri = params.textDocument.uri, range = {
          start = p, ['end'] = { line = p.line, character = p.character + 1 } } } })
      elseif method == 'workspace/symbol' then
        respond(nil, {
          { name = 'Widget', kind = 5, containerName = 'shop', location = {
            uri = vim.uri_from_fname(path),
            range = { start = { line = 0, character = 6 }, ['end'] = { line = 0, character = 12 } },
          } },
          { name = 'helper', kind = 12, location = { uri = 'file:///elsewhere/h%20x.txt' } },
        })
      elseif method == 'textDocument/hover' and opts.hover then
        respond(nil, { contents = opts.hover })
      end  -- anything else: never answered
      return true, id
    end,
    notify = function(method, params)
      log(method, params)
      if method == 'exit' then closing = true; dispatchers.on_exit(0, 15) end
      return true
    end,
    is_closing = function() return closing end,
    terminate = function() closing = true end,
  }
end
return { name = name, cmd = server, root_dir = vim.fs.dirname(path) }
end

local name, path, opts = ...
vim.cmd('edit ' .. vim.fn.fnameescape(path))
vim.lsp.start(_G.fake_config(name, path, opts), { bufnr = vim.api.nvim_get_current_buf() })
"""

FAKE_TEXT = "class Widget: x = 'é😀' + word\n"
CAPABILITIES = {"positionEncoding": "utf-8", "hoverProvider": True, "definitionProvider": True,
                "referencesProvider": True, "workspaceSymbolProvider": True}


async def start_fake(nvim, project, name, **opts):
    """Start (or reuse) the fake server `name` on its own file `<name>.fake`; its path."""
    path = project / f"{name}.fake"
    if not path.exists():
        path.write_text(FAKE_TEXT)
    options = {"capabilities": CAPABILITIES, "init_delay": 0, **opts}
    await nvim.exec_lua(FAKE_SERVER, name, str(path), options)
    return path


async def fake_calls(nvim, name):
    return await nvim.exec_lua("return _G.fake_calls[...]", name)


async def test_workspace_symbols(model, nvim, project):
    path = await start_fake(nvim, project, "fake")
    await wait_for_client(nvim, path, "fake")
    expected = {"symbols": [
        {"name": "Widget", "kind": "Class", "containerName": "shop", "uri": url(path),
         "range": {"start": {"line": 0, "character": 6}, "end": {"line": 0, "character": 12}}},
        # Percent-decoded, as every URI claude-nvim emits.
        {"name": "helper", "kind": "Function", "uri": "file:///elsewhere/h x.txt"},
    ]}
    assert await call(model, "lspWorkspaceSymbols", {"query": "w"}) == expected
    assert await call(model, "lspWorkspaceSymbols",
                      {"query": "w", "filePath": str(path)}) == expected
    asked = [c for c in await fake_calls(nvim, "fake") if c["method"] == "workspace/symbol"]
    assert [c["params"] for c in asked] == [{"query": "w"}, {"query": "w"}]


async def test_a_claude_on_another_host_gets_no_location_outside_its_map(
        nvim_address, nvim, project, tmp_path):
    path = await start_fake(nvim, project, "fake")
    await wait_for_client(nvim, path, "fake")
    async with running_app(nvim_address, lock_directory=tmp_path / "ide",
                           paths=PathMap.parse([f"/claude/ws={project}"])) as app, \
            mcp_client(app.port, app.token, path=MODEL_PATH) as mapped:
        answer = await call(mapped, "lspWorkspaceSymbols", {"query": "w"})
        # file:///elsewhere/h x.txt is outside the map: left out, not sent as it is.
        assert [(s["name"], s["uri"]) for s in answer["symbols"]] == [
            ("Widget", f"file:///claude/ws/{path.name}")]
        refused = await error(mapped, "lspWorkspaceSymbols",
                              {"query": "w", "filePath": "/claude/ws/../etc/passwd"})
        assert "outside the folders mapped for Claude" in refused


async def test_positions_of_a_utf8_server_are_converted_both_ways(model, nvim, project):
    path = await start_fake(nvim, project, "fake")
    where = at(FAKE_TEXT, "word")
    answer = await call(model, "lspReferences", {"filePath": str(path), **where})
    assert answer == {"locations": [{"uri": url(path), "range": span(FAKE_TEXT, "w"),
                                     "text": FAKE_TEXT.strip()}]}
    asked = [c for c in await fake_calls(nvim, "fake")
             if c["method"] == "textDocument/references"]
    byte = len(FAKE_TEXT[:FAKE_TEXT.index("word")].encode())
    assert asked[-1]["params"]["position"] == {"line": 0, "character": byte}
    assert byte != where["character"]


async def test_an_error_from_the_server_is_a_tool_error(model, nvim, project):
    path = await start_fake(nvim, project, "fake")
    message = await error(model, "lspDefinition",
                          {"filePath": str(path), "line": 0, "character": 0})
    assert message == "fake answered textDocument/definition with an error: definition exploded"


async def test_no_answer_in_time_cancels_the_request(nvim_address, nvim, project, tmp_path):
    path = await start_fake(nvim, project, "fake")
    await wait_for_client(nvim, path, "fake")
    hover = lsp_hover.make_tool(lsp.Limits(request_timeout=0.3))
    async with model_client_of(nvim_address, tmp_path / "ide", hover) as model:
        message = await error(model, "lspHover",
                              {"filePath": str(path), "line": 0, "character": 0})
    assert message == ("No answer within 0.3 s: gave up waiting for fake to answer "
                       "textDocument/hover")
    calls = await fake_calls(nvim, "fake")
    hover = [i for i, c in enumerate(calls) if c["method"] == "textDocument/hover"][-1]
    assert calls[hover + 1]["method"] == "$/cancelRequest"


async def test_a_server_still_starting_is_waited_for(model, nvim, project):
    path = await start_fake(nvim, project, "slow", init_delay=300, hover="slow but sure")
    with trio.fail_after(WAIT):
        answer = await call(model, "lspHover",
                            {"filePath": str(path), "line": 0, "character": 0})
    assert answer == {"contents": "slow but sure"}


async def test_a_server_that_never_starts(nvim_address, nvim, project, tmp_path):
    path = await start_fake(nvim, project, "stuck", init_delay=-1)
    hover = lsp_hover.make_tool(lsp.Limits(attach_wait=0.2))
    async with model_client_of(nvim_address, tmp_path / "ide", hover) as model:
        message = await error(model, "lspHover",
                              {"filePath": str(path), "line": 0, "character": 0})
    assert message == (f"The language server stuck attached to {path} did not finish "
                       "starting within 0.2 s")


async def test_a_server_attaching_late_to_a_file_just_loaded(nvim_address, nvim, project,
                                                             tmp_path):
    await start_fake(nvim, project, "fake")  # defines _G.fake_config
    path = project / "late.late"
    path.write_text("late text\n")
    # Like vim.lsp.enable() with a root_dir function: the server starts a moment after the
    # file is loaded, then takes its time to initialize.
    await nvim.exec_lua("""
      local path, opts = ...
      vim.filetype.add({ extension = { late = 'late' } })
      vim.api.nvim_create_autocmd('FileType', { pattern = 'late', callback = function(args)
        vim.schedule(function()
          vim.lsp.start(_G.fake_config('late', path, opts), { bufnr = args.buf })
        end)
      end })
    """, str(path), {"capabilities": CAPABILITIES, "init_delay": 300, "hover": "late"})
    hover = lsp_hover.make_tool(lsp.Limits(fresh_wait=0.1))
    async with model_client_of(nvim_address, tmp_path / "ide", hover) as model:
        with trio.fail_after(WAIT):
            answer = await call(model, "lspHover",
                                {"filePath": str(path), "line": 0, "character": 0})
    assert answer == {"contents": "late"}
