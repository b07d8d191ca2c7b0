"""Workspaces: the directory an agent works in, made from a Task."""

from .extension import install_extension_module
from .files import TEMPLATES_DIR, Workspace, WorkspaceError, adopt_workspace, create_workspace, open_workspace

__all__ = ["Workspace", "WorkspaceError", "create_workspace", "adopt_workspace", "open_workspace",
           "install_extension_module", "TEMPLATES_DIR"]
