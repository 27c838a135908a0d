pytest_plugins = ["claude_nvim.testing"]
