"""Workspaces: the directory an agent works in, made from a Task."""

from .files import Workspace, WorkspaceError, adopt_workspace, create_workspace, open_workspace

__all__ = ["Workspace", "WorkspaceError", "create_workspace", "adopt_workspace", "open_workspace"]
