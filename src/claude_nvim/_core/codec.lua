-- claude_nvim.codec: a file's bytes as the text Neovim reads from them, and a buffer's text as
-- the bytes :write writes; the one codec of claude-nvim: the reload (claude_nvim.reload) and
-- the review's texts before and after a turn (claude_nvim.review). Nothing else turns bytes
-- into a buffer's text, or back.
local M = {}

local SWAP_CR_LF = { ['\r'] = '\n', ['\n'] = '\r' }  -- 'fileformat' mac: a CR ends a line
local BOM = '\239\187\191'

-- The 'fileformat' Neovim gives a new buffer of `data` ('fileformats' "unix,dos"): dos when
-- every line ends in CR LF.
local function guess_format(data)
  local _, lf = data:gsub('\n', '')
  local _, crlf = data:gsub('\r\n', '')
  return (lf > 0 and lf == crlf) and 'dos' or 'unix'
end

--- `data` (a file's bytes) as the text Neovim's read of it into `buf` gives, by `buf`'s
--- options (nil: a new buffer's): converted from 'fileencoding', its BOM taken off, lines
--- ended as 'fileformat' says (forced, as a reload forces them; a DOS file's last "line" of
--- only CTRL-Z is no line), a 'binary' buffer's bytes as they are; each line followed by "\n".
--- And the options that reading sets. Or nil and why.
---@param data string
---@param buf? integer
---@return string|nil text
---@return {bomb: boolean, endoffile: boolean, eol: boolean}|string read the options, or why not
function M.decode(data, buf)
  local bo = buf and vim.bo[buf]
  local fenc, binary = bo and bo.fileencoding or '', bo and bo.binary or false
  if fenc ~= '' and fenc ~= 'utf-8' then
    local converted = vim.iconv(data, fenc, 'utf-8')
    if converted == nil then return nil, 'cannot be converted from ' .. fenc end
    data = converted
  end
  local read = { bomb = false, endoffile = false }
  if not binary and (fenc == '' or fenc:sub(1, 1) == 'u') and data:sub(1, 3) == BOM then
    data, read.bomb = data:sub(4), true
  end
  local format = bo and bo.fileformat or guess_format(data)
  if not binary and format == 'dos' then
    data = data:gsub('\r\n', '\n')
    if data:sub(-1) == '\26' and (#data == 1 or data:sub(-2, -2) == '\n') then
      data, read.endoffile = data:sub(1, -2), true  -- a last "line" of only CTRL-Z
    end
  elseif not binary and format == 'mac' then
    data = data:gsub('[\r\n]', SWAP_CR_LF)
  end
  read.eol = data == '' or data:sub(-1) == '\n'
  return read.eol and data or data .. '\n', read
end

--- `buf`'s text as its file holds it (its 'fileformat', 'eol', 'bomb', 'fileencoding'): a
--- modified buffer's as :write would write it, an unmodified one's last newline as it was
--- read. The inverse of M.decode: 'fileformat' mac writes a line's CR as the LF it was read
--- from.
---@param buf integer
---@return string
function M.encode(buf)
  local api = vim.api
  local bo = vim.bo[buf]
  local mac = bo.fileformat == 'mac'
  local nl = (bo.fileformat == 'dos' and not bo.binary) and '\r\n' or '\n'
  local lines = api.nvim_buf_get_lines(buf, 0, -1, false)
  local empty = #lines == 1 and lines[1] == '' and api.nvim_buf_get_offset(buf, 1) <= 0
  local text = empty and '' or table.concat(lines, nl)
  if not empty and (bo.eol or (bo.modified and bo.fixeol and not bo.binary)) then
    text = text .. nl
  end
  if mac and not bo.binary then text = text:gsub('[\r\n]', SWAP_CR_LF) end
  local fenc = bo.fileencoding
  if bo.bomb and (fenc == '' or fenc:match('^utf%-?8')) then text = BOM .. text end
  if fenc ~= '' and not fenc:match('^utf%-?8$') then
    text = vim.iconv(text, 'utf-8', fenc) or text
  end
  return text
end

return M
