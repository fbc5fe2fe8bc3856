"""tileir.tools: command-line tools."""
