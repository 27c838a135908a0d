"""An example claude-nvim plugin: tools Claude's model can call through the model endpoint."""
