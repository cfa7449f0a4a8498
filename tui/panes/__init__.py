"""The console's panes, one widget each, in the order they sit on the screen."""

from .backlog import BacklogPane
from .base import Pane
from .checkpoint import CheckpointPane
from .inflight import InFlightPane
from .jobs import JobsPane
from .log import LogPane
from .orphans import OrphansPane

PANES: tuple[type[Pane], ...] = (
    BacklogPane,
    InFlightPane,
    OrphansPane,
    CheckpointPane,
    JobsPane,
    LogPane,
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
]
