"""What the CLI and the console both say, written once: sizes, ages, times and
paths; a core event in one line; the plan; rows as text. (An operation's
result in words is declared with the operation, in tui/operations.)

Nothing here imports the console, the CLI or Textual (an import-linter
contract). Its modules, one line each, are in the module map of docs/architecture.md.
"""
