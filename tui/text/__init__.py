"""What the CLI and the console both say: sizes, times and paths as an operator
reads them, each operation's result in words, an event in one line.

The module map (docs/architecture.md) lists its modules.
"""
