"""The one base class for problems the user can fix.

A :class:`UserError` ends a command with exit code 2 and its message on one line, never a
traceback. Anything else that escapes a pass is a bug, and :func:`dftpass.core.manager.run_pass`
turns it into a :class:`PluginError` that names the pass and its plugin.
"""


class UserError(Exception):
    """Bad input, configuration or environment; the message says what and where (exit 2)."""


class PluginError(Exception):
    """A plugin's hook or pass raised; the message names the plugin (and the pass).
    ``pass_id`` and ``plugin`` say which pass and plugin, when it was a pass."""

    def __init__(self, message: str, pass_id: str | None = None, plugin: str | None = None) -> None:
        super().__init__(message)
        self.pass_id, self.plugin = pass_id, plugin


#: the exit codes of every command (``dftpass --help`` says what each means); a pass that
#: raised and was skipped (the other rules' edits applied): EXIT_PASS_FAILED
EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
EXIT_PASS_FAILED = 4
