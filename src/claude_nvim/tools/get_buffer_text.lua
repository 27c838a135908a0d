-- getBufferText's Neovim half (claude_nvim.tools.getBufferText): lines of an open buffer,
-- capped in lines and bytes (tools/get_buffer_text.py).
local api = vim.api
local core = package.loaded['claude_nvim.core'] ---@module 'claude_nvim.core'
local reload = package.loaded['claude_nvim.reload'] ---@module 'claude_nvim.reload'
local M = {}

-- `s` cut to at most `n` bytes, not inside a UTF-8 sequence.
local cut = core.cut

--- Lines req.startLine..req.endLine (0-based, inclusive; default: all) of the buffer of the
--- first candidate, at most req.max_lines lines and req.max_bytes bytes of text.
---@param candidates string[] the path as Claude gave it, then where it may be here
---@param req {startLine?: integer, endLine?: integer, max_lines: integer, max_bytes: integer}
---@return table answer the tool's, or {error = why}
function M.read(candidates, req)
  local buf = core.find_buffer(candidates)
  if buf == nil or not api.nvim_buf_is_loaded(buf) then
    return { error = core.absolute(candidates[1]) .. ' is not open in Neovim' }
  end
  reload.refresh(buf)
  local path = api.nvim_buf_get_name(buf)
  local count = api.nvim_buf_line_count(buf)
  local first = req.startLine or 0
  local last = req.endLine or (count - 1)
  if first >= count then
    return { error = ("Invalid arguments: 'startLine' %d is past the end of %s (%d lines)")
      :format(first, path, count) }
  end
  if last < first then
    return { error = "Invalid arguments: 'endLine' must not be before 'startLine'" }
  end
  last = math.min(last, count - 1)
  local limit = math.min(last, first + req.max_lines - 1)
  local parts, bytes, full = {}, 0, false
  local row = first
  while row <= limit and not full do  -- in batches: never copy much beyond the cap
    local batch = api.nvim_buf_get_lines(buf, row, math.min(row + 100, limit + 1), false)
    for _, line in ipairs(batch) do
      local sep = #parts > 0 and 1 or 0
      if bytes + sep + #line > req.max_bytes then
        local room = req.max_bytes - bytes - sep
        if room > 0 or #parts == 0 then parts[#parts + 1] = cut(line, math.max(room, 0)) end
        full = true
        break
      end
      parts[#parts + 1] = line
      bytes = bytes + sep + #line
    end
    row = row + #batch
  end
  local answer = {
    uri = core.file_url(path),
    text = table.concat(parts, '\n'),
    startLine = first,
    endLine = first + #parts - 1,
    totalLines = count,
    isDirty = vim.bo[buf].modified,
  }
  local truncated = full or limit < last
  if truncated then answer.truncated = true end
  return answer
end

return M
