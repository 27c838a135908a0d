-- claude_nvim.tell: the one way claude-nvim tells the user something. The server's Lua has it
-- as core.tell; the Neovim plugin, which runs before any server and without one, reads this
-- same file from its checkout (require('claude_nvim').tell). Nothing here needs a server.
local api = vim.api
local M = {}

--- `s` cut to at most `width` screen cells, '…' included; one cut, found by halving.
---@param s string
---@param width integer
---@return string
function M.fit(s, width)
  if vim.fn.strdisplaywidth(s) <= width then return s end
  local low, high = 0, math.min(vim.fn.strchars(s), width)  -- chars that fit with the '…'
  while low < high do
    local mid = math.ceil((low + high) / 2)
    if vim.fn.strdisplaywidth(vim.fn.strcharpart(s, 0, mid)) <= width - 1 then
      low = mid
    else
      high = mid - 1
    end
  end
  return vim.fn.strcharpart(s, 0, low) .. '…'
end

local HIGHLIGHT = { WARN = 'WarningMsg', ERROR = 'ErrorMsg' }

--- Something the user must know (never anything else goes to their screen), as data: one line
--- (control characters, a newline in a file name, shown as ^J), never a hit-enter prompt,
--- whatever the screen: a message on screen is overwritten (:redraw), not pushed up. What fits
--- the command line is shown and kept in :messages as it is. A longer message: with
--- 'shortmess' T, :echomsg shows it cut to fit and keeps it whole in :messages (it reads the
--- text from g:claude_nvim_telling: no Ex source is made of it); else, or with 'cmdheight' 0,
--- it is cut here to what fits.
---@param msg string
---@param level? 'INFO'|'WARN'|'ERROR'
---@return boolean shown false when this screen has no room at all (the caller may log it)
function M.tell(msg, level)
  msg = vim.fn.strtrans((('claude-nvim: ' .. msg):gsub('\n', '^J')))
  local hl = HIGHLIGHT[level] or 'Normal'
  vim.cmd('redraw')
  local room = vim.v.echospace
  if vim.fn.strdisplaywidth(msg) <= room then
    api.nvim_echo({ { msg, hl } }, true, {})
    return true
  end
  if vim.o.cmdheight > 0 and room > 1 and vim.o.shortmess:find('T', 1, true) then
    vim.g.claude_nvim_telling = msg
    vim.cmd('echohl ' .. hl .. ' | echomsg g:claude_nvim_telling | echohl None')
    vim.g.claude_nvim_telling = nil
    return true
  end
  if room < 2 then return false end
  api.nvim_echo({ { M.fit(msg, room - 1), hl } }, true, {})
  return true
end

return M
