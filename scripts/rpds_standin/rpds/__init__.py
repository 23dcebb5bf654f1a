"""Pure-Python stand-in for rpds-py inside Pyodide.

rpds-py has no wheel for Pyodide 314, and jsonschema/referencing import only a few of its
persistent types. pyrsistent-as-rpds-py implements them on top of pyrsistent; this module
gives them the import name `rpds` that those libraries expect.
"""

from pyrsistent_as_rpds.pure import *  # noqa: F403
from pyrsistent_as_rpds.pure import __all__  # noqa: F401
