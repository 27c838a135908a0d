"""The example tools through claude-nvim's model endpoint, on a real headless Neovim."""

from __future__ import annotations

import subprocess


async def test_tools_are_listed_for_the_model(model_client):
    names = {t["name"] for t in (await model_client.result("tools/list"))["tools"]}
    assert {"bufferStats", "gitHunks"} <= names


async def test_buffer_stats_counts_unsaved_text_and_ranges(model_client, nvim, tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("one two\nthree\n")
    await nvim.request("nvim_command", f"edit {path}")
    await nvim.exec_lua("vim.api.nvim_buf_set_lines(0, 2, 2, false, {'four five six ünï'})")
    assert await model_client.call_json("bufferStats") == {
        "filePath": str(path), "startLine": 0, "endLine": 2,
        "lines": 3, "words": 7, "characters": 7 + 5 + 17}
    ranged = await model_client.call_json("bufferStats", {"filePath": str(path),
                                                          "startLine": 1, "endLine": 1})
    assert (ranged["lines"], ranged["words"]) == (1, 1)


async def test_buffer_stats_of_an_unopened_file_is_an_error(model_client, tmp_path):
    await model_client.tool_error("bufferStats", {"filePath": str(tmp_path / "nope")})
    assert "'startLine'" in await model_client.tool_error("bufferStats", {"startLine": -1})


async def test_git_hunks_compare_the_buffer_with_head(model_client, nvim, tmp_path):
    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)
    git("init", "-q")
    path = tmp_path / "code.py"
    path.write_text("a\nb\nc\nd\n")
    git("add", "code.py")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first")
    await nvim.request("nvim_command", f"edit {path}")
    assert (await model_client.call_json("gitHunks"))["hunks"] == []
    # Unsaved: change line b, delete d, add two lines at the top.
    await nvim.exec_lua("vim.api.nvim_buf_set_lines(0, 1, 2, false, {'B'})")
    await nvim.exec_lua("vim.api.nvim_buf_set_lines(0, 3, 4, false, {})")
    await nvim.exec_lua("vim.api.nvim_buf_set_lines(0, 0, 0, false, {'x', 'y'})")
    answer = await model_client.call_json("gitHunks", {"filePath": str(path)})
    assert answer["tracked"] is True
    assert answer["hunks"] == [
        {"type": "add", "oldStart": 0, "oldLines": 0, "newStart": 0, "newLines": 2},
        {"type": "change", "oldStart": 1, "oldLines": 1, "newStart": 3, "newLines": 1},
        {"type": "delete", "oldStart": 3, "oldLines": 1, "newStart": 5, "newLines": 0},
    ]


async def test_git_hunks_of_an_untracked_file(model_client, nvim, tmp_path):
    path = tmp_path / "loose.txt"
    path.write_text("x\n")
    await nvim.request("nvim_command", f"edit {path}")
    assert await model_client.call_json("gitHunks") == {"filePath": str(path),
                                                        "tracked": False, "hunks": []}
