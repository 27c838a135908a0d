"""The LSP tools' shared Lua (``lsp.lua``) and the answers Lua sends later (:mod:`.replies`)."""
