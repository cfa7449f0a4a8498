"""What the CLI and the console both say, written once: ``fmt`` (sizes, ages,
times and paths as an operator reads them; ``LIST_MAX``), ``events`` (a core
event in one line), ``plan`` (the backlog and what recovery would settle) and
``results`` (any operation's result in words, as its entry in tui/operations
declares them).

Nothing here imports the console, the CLI or Textual (an import-linter contract).
"""
