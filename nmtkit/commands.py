"""The commands, listed once.

The console scripts (``setup.py`` reads :func:`console_scripts` from this file), their entry
points (:mod:`nmtkit.launch`) and the ``nmtkit`` group's subcommands (:mod:`nmtkit.cli.main`) are
all derived from :data:`COMMANDS`.  Plain Python with no imports: the build reads it without
importing nmtkit, and the launcher before anything else.
"""

#: Subcommand -> the module that defines its click ``command``; ``nmtkit-NAME`` is its console script.
COMMANDS = {
    "sample": "nmtkit.cli.sample",
    "preprocess": "nmtkit.cli.preprocess",
    "train": "nmtkit.cli.train",
    "translate": "nmtkit.cli.translate",
    "score": "nmtkit.cli.score",
    "align": "nmtkit.cli.align",
    "average": "nmtkit.cli.average",
    "shortlist": "nmtkit.cli.shortlist",
    "symmetrize": "nmtkit.cli.symmetrize",
}

#: The ``nmtkit`` group (every subcommand behind one program).
GROUP = "nmtkit"
GROUP_MODULE = "nmtkit.cli.main"


def program(name):  # type: (str) -> str
    """How messages name a command: ``nmtkit`` for the group, ``nmtkit-NAME`` otherwise."""
    return GROUP if name == GROUP else f"nmtkit-{name}"


def module(name):  # type: (str) -> str
    """The module that defines command ``name``'s click ``command``."""
    return GROUP_MODULE if name == GROUP else COMMANDS[name]


def console_scripts():  # type: () -> list[str]
    """``setup.py``'s console scripts: each program starts in :mod:`nmtkit.launch`."""
    return [f"{program(name)} = nmtkit.launch:{name}" for name in (GROUP, *COMMANDS)]
