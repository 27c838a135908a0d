"""The core feature: ``core.lua``, the helpers every other Lua module uses."""
