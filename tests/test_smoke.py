async def test_tools_list(client):
    result = await client.result("tools/list")
    names = {t["name"] for t in result["tools"]}
    assert names == {"getCurrentSelection", "getLatestSelection", "getOpenEditors", "getDiagnostics"}


async def test_current_selection_normal_mode(client, nvim, tmp_path):
    f = tmp_path / "a.py"
    f.write_text("héllo 😀x\nline2\n")
    await nvim.command if False else None
    await nvim.request("nvim_command", f"edit {f}")
    await nvim.request("nvim_win_set_cursor", 0, [1, 11])
    got = await client.call_json("getCurrentSelection")
    assert got["success"] is True
    assert got["selection"]["start"] == {"line": 0, "character": 8}
    assert got["filePath"] == str(f)
