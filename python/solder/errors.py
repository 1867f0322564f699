"""Solder's Python exceptions. Every error carries Solder's message; errors about a program's text
carry its file, line and column ("softmax.sol:4:17: error: unknown tensor 'zz' ...")."""


class SolderError(RuntimeError):
    """Base class of every error Solder raises.

    Attributes: ``file``, ``line``, ``column`` (0 when unknown) and ``message`` (without the position);
    ``str(error)`` is the formatted "file:line:column: error: message"."""

    def __init__(self, formatted="", file="", line=0, column=0, message=None):
        super().__init__(formatted)
        self.file = file
        self.line = line
        self.column = column
        self.message = formatted if message is None else message


class ProgramError(SolderError):
    """The program's text is wrong: a parse or verification error at file:line:column."""


class ArgumentError(SolderError, ValueError):
    """A call or compile option is wrong: a tensor's dtype, shape, device or layout, or a dim."""


class UnsupportedError(SolderError):
    """The torch.compile backend cannot translate a node (it falls back to Inductor for it)."""
