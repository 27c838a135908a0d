"""``claude-nvim hold``: a Claude whose terminal outlives Neovim, dtach-like.

A holder process (``holder.py``) runs claude in a pseudo-terminal of its own, in a session of
its own, and listens on ``claude-<n>.sock`` in the project's directory (``_project``); Neovim
attaches its terminal to that socket itself (``lua/claude_nvim/attach.lua``), or runs the
attach client (``client.py``) there, which relays its terminal to the socket and back.
Quitting Neovim ends only that connection. The holder keeps a bounded ring of claude's recent
output and replays it to the next client. It interprets nothing claude prints: bytes in, bytes
out. It ends when claude does, and removes its files. ``protocol.py`` is the wire, no I/O.
"""
