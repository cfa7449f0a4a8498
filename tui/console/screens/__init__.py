"""The console's screens besides the main one: the confirmation, help, the
restore browser and the legal holds."""

from .confirm import ConfirmScreen
from .help import HelpScreen
from .holds import HoldsScreen
from .restore import RestoreScreen

__all__ = ["ConfirmScreen", "HelpScreen", "HoldsScreen", "RestoreScreen"]
