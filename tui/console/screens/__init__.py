"""The console's screens besides the main one: the confirmation, help, the
restore browser, the legal holds, the pager, a path's versions and the find box."""

from .confirm import ConfirmScreen
from .find import FindScreen
from .help import HelpScreen, KeyedScreen
from .holds import HoldsScreen
from .pager import PagerScreen
from .restore import RestoreScreen
from .versions import VersionsScreen

__all__ = [
    "ConfirmScreen",
    "FindScreen",
    "HelpScreen",
    "HoldsScreen",
    "KeyedScreen",
    "PagerScreen",
    "RestoreScreen",
    "VersionsScreen",
]
