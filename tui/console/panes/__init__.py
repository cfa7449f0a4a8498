"""The console's panes, one widget each, in the order they sit on the screen (and
their tabs and digit keys in a narrow terminal). In a wide one the grid places
them in this order; Remote sits under Checkpoint (app.tcss)."""

from .backlog import BacklogPane
from .base import Pane, PaneTabs
from .checkpoint import CheckpointPane
from .inflight import InFlightPane
from .jobs import JobsPane
from .log import LogPane
from .orphans import OrphansPane
from .remote import RemotePane

PANES: tuple[type[Pane], ...] = (
    BacklogPane,
    InFlightPane,
    OrphansPane,
    CheckpointPane,
    JobsPane,
    LogPane,
    RemotePane,
)

__all__ = [
    "PANES",
    "BacklogPane",
    "CheckpointPane",
    "InFlightPane",
    "JobsPane",
    "LogPane",
    "OrphansPane",
    "Pane",
    "PaneTabs",
    "RemotePane",
]
