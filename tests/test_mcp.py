"""The JSON-RPC / MCP layer on its own: no socket, no Neovim (docs/protocol.md §6)."""

from __future__ import annotations

import json

import pytest
import trio

from claude_nvim import Tool
from claude_nvim._mcp import McpSession
from claude_nvim._schema import SchemaError
from claude_nvim._tool import ConnectionInfo
from claude_nvim._wire import jsontext
from helpers import SCHEMA, WAIT, echo, session


async def ask(s: McpSession, message) -> dict | None:
    return await s.handle(message if isinstance(message, str) else json.dumps(message))


def req(method, params=None, id=0):
    m = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        m["params"] = params
    return m


async def test_initialize_echoes_a_known_protocol_version_and_advertises_tools():
    s = session()
    reply = await ask(s, req("initialize", {"protocolVersion": "2025-11-25",
                                            "clientInfo": {"name": "claude-code"}}))
    assert reply["id"] == 0
    assert reply["result"]["protocolVersion"] == "2025-11-25"
    assert "tools" in reply["result"]["capabilities"]
    assert "prompts" not in reply["result"]["capabilities"]
    assert reply["result"]["serverInfo"]["name"] == "claude-nvim"
    assert s.connection.client_info == {"name": "claude-code"}
    old = await ask(s, req("initialize", {"protocolVersion": "1999-01-01"}, id=1))
    assert old["result"]["protocolVersion"] == "2024-11-05"


async def test_ids_of_any_valid_type_are_echoed_verbatim():
    s = session()
    for request_id in ("0", "7", '"abc"', '""', "1.5", "null", "-9223372036854775808",
                       "18446744073709551615", "1180591620717411303424", "-" + "9" * 40):
        reply = await ask(s, f'{{"jsonrpc":"2.0","id":{request_id},"method":"ping"}}')
        # As the client reads it: the id's JSON text is the one it sent.
        assert jsontext.dumps(reply).decode() == (
            f'{{"jsonrpc":"2.0","id":{request_id},"result":{{}}}}')


async def test_calls_with_ids_past_64_bits_are_told_apart_when_cancelled():
    s = session()
    ended = []
    with trio.fail_after(WAIT):
        async with trio.open_nursery() as nursery:
            async def call(request_id):
                await ask(s, req("tools/call", {"name": "slow"}, id=request_id))
                ended.append(request_id)
            for request_id in (2**70 + 1, 2**70):  # as floats, the same number
                nursery.start_soon(call, request_id)
                await trio.sleep(0.01)
            for request_id in (2**70 + 1, 2**70):
                await ask(s, {"jsonrpc": "2.0", "method": "notifications/cancelled",
                              "params": {"requestId": request_id}})
                await trio.sleep(0.01)
                assert ended[-1] == request_id


async def test_notifications_are_never_answered():
    s = session()
    assert await ask(s, {"jsonrpc": "2.0", "method": "notifications/initialized"}) is None
    assert s.initialized
    connected = {"jsonrpc": "2.0", "method": "ide_connected", "params": {"pid": 31}}
    assert await ask(s, connected) is None
    assert s.connection.client_pid == 31
    assert await ask(s, {"jsonrpc": "2.0", "method": "file_updated", "params": {}}) is None
    assert await ask(s, {"jsonrpc": "2.0", "method": "tools/call"}) is None


async def test_malformed_messages_get_the_json_rpc_error_codes():
    s = session()
    assert (await ask(s, "{nope"))["error"]["code"] == -32700
    assert (await ask(s, "{nope"))["id"] is None
    for not_json in ("NaN", "Infinity", "-Infinity", "1e400", "-1e400"):
        reply = await ask(s, f'{{"jsonrpc":"2.0","id":{not_json},"method":"ping"}}')
        assert reply["error"]["code"] == -32700 and reply["id"] is None, not_json
        reply = await ask(s, '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":'
                             f'{{"name":"echo","arguments":{{"path":"x","line":{not_json}}}}}}}')
        assert reply["error"]["code"] == -32700, not_json
    assert (await ask(s, "[" * 100_000 + "]" * 100_000))["error"]["code"] in (-32700, -32600)
    assert (await ask(s, json.dumps([req("ping")])))["error"]["code"] == -32600
    assert (await ask(s, "42"))["error"]["code"] == -32600
    assert (await ask(s, {"id": 3, "method": "ping"}))["error"]["code"] == -32600  # no jsonrpc
    no_method = await ask(s, {"jsonrpc": "2.0", "id": 4})
    assert no_method["error"]["code"] == -32600 and no_method["id"] == 4
    bad_id = await ask(s, {"jsonrpc": "2.0", "id": {"x": 1}, "method": "ping"})
    assert bad_id["error"]["code"] == -32600 and bad_id["id"] is None
    assert (await s.handle(b"\x00binary"))["error"]["code"] == -32600
    bad_params = await ask(s, req("ping", params=[1, 2], id=5))
    assert bad_params["error"]["code"] == -32600


async def test_responses_from_the_client_are_ignored():
    s = session()
    assert await ask(s, {"jsonrpc": "2.0", "id": 9, "result": {"roots": []}}) is None


async def test_unknown_method_and_unknown_tool_are_method_not_found():
    s = session()
    assert (await ask(s, req("resources/list")))["error"]["code"] == -32601
    reply = await ask(s, req("tools/call", {"name": "nope"}))
    assert reply["error"] == {"code": -32601, "message": "Tool not found: nope"}
    assert (await ask(s, req("prompts/list")))["result"] == {"prompts": []}


async def test_tools_list_shows_described_tools_only_and_marks_the_session():
    s = session()
    assert not s.tools_listed.is_set()
    tools = (await ask(s, req("tools/list", {"cursor": "x"})))["result"]["tools"]
    assert s.tools_listed.is_set()
    by_name = {t["name"]: t for t in tools}
    assert "hidden" not in by_name
    assert by_name["echo"] == {"name": "echo", "description": "Echo.", "inputSchema": SCHEMA,
                               "annotations": {"readOnlyHint": True}}
    assert "annotations" not in by_name["fails"]
    assert "nextCursor" not in (await ask(s, req("tools/list")))["result"]


async def test_hidden_tools_stay_callable_and_meta_is_ignored():
    s = session()
    reply = await ask(s, req("tools/call", {"name": "hidden", "arguments": {"a": 1},
                                            "_meta": {"progressToken": 3}}))
    assert json.loads(reply["result"]["content"][0]["text"]) == {"a": 1}


async def test_arguments_that_break_the_schema_are_tool_errors_naming_the_argument():
    s = session()
    for arguments, words in [
        ({}, "'path'"),
        ({"path": 3}, "'path' must be of type string"),
        ({"path": "a", "line": 0}, "'line' must be at least 1"),
        ({"path": "a", "line": True}, "'line' must be of type integer"),
        ([1], "must be of type object"),
    ]:
        reply = await ask(s, req("tools/call", {"name": "echo", "arguments": arguments}))
        result = reply["result"]
        assert result["isError"] is True
        assert words in result["content"][0]["text"], (arguments, result)
    ok = await ask(s, req("tools/call", {"name": "echo",
                                         "arguments": {"path": "a", "extra": [1]}}))
    assert "isError" not in ok["result"]  # unknown keys are ignored: new CLIs add some


async def test_arguments_neovim_cannot_take_are_invalid_whatever_the_schema():
    # Before: the call reached the tool, and packing for Neovim failed ("Internal error:
    # UnicodeEncodeError" / "OverflowError").
    s = session()
    for raw_arguments, words in [
        ('{"path": "\\ud800"}', "'path' is not text: it holds a lone surrogate (U+D800)"),
        ('{"path": "a\\udfff"}', "'path' is not text"),
        ('{"path": "a", "line": 1180591620717411303424}', "'line' is out of range"),
        ('{"path": "a", "deep": [{"n": -1000000000000000000000}]}', "'deep[0].n' is out of range"),
        ('{"path": "a", "\\udbff": 1}', "'\\udbff' is not text"),
    ]:
        reply = await ask(s, '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": '
                             f'{{"name": "echo", "arguments": {raw_arguments}}}}}')
        assert reply["result"]["isError"] is True, raw_arguments
        text = reply["result"]["content"][0]["text"]
        assert text.startswith("Invalid arguments for echo: ") and words in text, text
    # U+DC80..U+DCFF stand for the bytes of non-UTF-8 file names, as the server sends them.
    for fine in ('{"path": "caf\\udce9.txt"}', '{"path": "a", "line": 18446744073709551615}'):
        reply = await ask(s, '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": '
                             f'{{"name": "echo", "arguments": {fine}}}}}')
        assert "isError" not in reply["result"], reply


async def test_the_whole_json_schema_is_checked_not_a_subset():
    strict = {"type": "object", "additionalProperties": False, "required": ["name", "mode"],
              "properties": {"name": {"type": "string", "minLength": 1, "pattern": "^[a-z]+$"},
                             "mode": {"oneOf": [{"const": "fast"}, {"type": "integer"}]},
                             "tags": {"type": "array", "maxItems": 2}}}
    s = McpSession(ConnectionInfo(1), {"strict": Tool("strict", strict, echo)}, lambda t, c: None)
    for arguments, words in [
        ({"name": "", "mode": "fast"}, "'name' must be longer than or equal to 1 characters"),
        ({"name": "A", "mode": "fast"}, "'name' must match pattern ^[a-z]+$"),
        ({"name": "a", "mode": "slow"}, "'mode' must be valid exactly by one definition"),
        ({"name": "a", "mode": 1, "tags": [1, 2, 3]}, "'tags' must contain less than or equal"),
        ({"name": "a", "mode": 1, "other": 1}, "arguments must not contain {'other'}"),
    ]:
        result = (await ask(s, req("tools/call", {"name": "strict", "arguments": arguments})))
        assert result["result"]["isError"] is True, arguments
        text = result["result"]["content"][0]["text"]
        assert text.startswith("Invalid arguments for strict: ") and words in text, text
    ok = await ask(s, req("tools/call", {"name": "strict", "arguments": {"name": "a", "mode": 2}}))
    assert "isError" not in ok["result"]


def test_a_schema_that_is_not_json_schema_is_refused_naming_the_tool():
    tool = Tool("typo", {"type": "object", "properties": {"a": {"type": "strng"}}}, echo)
    with pytest.raises(SchemaError, match="tool 'typo': input_schema is not valid JSON Schema"):
        tool.check_arguments  # noqa: B018


async def test_failing_handlers_become_tool_errors_and_the_session_goes_on():
    s = session()
    failed = (await ask(s, req("tools/call", {"name": "fails"})))["result"]
    assert failed["isError"] is True
    assert failed["content"][0]["text"] == "Internal error: RuntimeError: kaboom"
    refused = (await ask(s, req("tools/call", {"name": "refuses"})))["result"]
    assert refused == {"content": [{"type": "text", "text": "File not found: /nope"}],
                       "isError": True}
    bad = (await ask(s, req("tools/call", {"name": "bad"})))["result"]
    assert bad["isError"] is True
    assert (await ask(s, req("ping", id=8)))["result"] == {}


async def test_editor_errors_become_tool_errors_with_their_message():
    s = session()
    for name, text in [("lua_error", "E5108: oops"), ("no_answer", "no answer in 5 s"),
                       ("gone", "Neovim went away")]:
        result = (await ask(s, req("tools/call", {"name": name})))["result"]
        assert result == {"content": [{"type": "text", "text": text}], "isError": True}
    assert (await ask(s, req("ping", id=8)))["result"] == {}


async def test_a_cancelled_call_is_not_answered():
    s = session()
    replies = []
    async with trio.open_nursery() as nursery:
        async def call():
            replies.append(await ask(s, req("tools/call", {"name": "slow"}, id=12)))
        nursery.start_soon(call)
        await trio.sleep(0.01)
        await ask(s, {"jsonrpc": "2.0", "method": "notifications/cancelled",
                      "params": {"requestId": 12}})
    assert replies == [None]


def test_json_text_escapes_lone_surrogates_and_keeps_utf8_otherwise():
    assert jsontext.dumps({"t": "é😀", 1: [1.5, None]}) == '{"t":"é😀","1":[1.5,null]}'.encode()
    text = jsontext.dumps({"t": "a\udcff"})  # from a buffer that is not UTF-8
    assert json.loads(text.decode("utf-8")) == {"t": "a\udcff"}
    assert jsontext.dumps(2**70) == b"1180591620717411303424"
    assert jsontext.loads('{"t":"a\\udcff"}') == {"t": "a\udcff"}
    assert jsontext.loads(b'[1,"\xc3\xa9"]') == [1, "é"]
    with pytest.raises(ValueError, match="Expecting"):
        jsontext.loads("{")
    assert jsontext.loads_exact("[1180591620717411303424,1.5]") == [2**70, 1.5]
    for not_json in ("NaN", "[Infinity]", '{"x":1e400}', '"\\udcff", -Infinity'):
        with pytest.raises(ValueError):
            jsontext.loads(not_json)
