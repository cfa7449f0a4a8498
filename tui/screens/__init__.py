"""The console's screens besides the main one: the confirmation, help, and the
restore browser."""

from .confirm import ConfirmScreen
from .help import HelpScreen
from .restore import RestoreScreen

__all__ = ["ConfirmScreen", "HelpScreen", "RestoreScreen"]
