"""The root of every error the kit raises on purpose: `NmtkitError`.

An `NmtkitError`'s message is the whole story for a user (which file, line or key, and what to do), so the CLI
prints it as one line; anything else escaping the kit is a bug and is reported as one, with the log path.
"""


class NmtkitError(Exception):
    """An error the kit raised on purpose; its message names the file, line or key and what to do."""
