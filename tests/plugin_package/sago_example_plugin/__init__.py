"""An example sago plug-in: the ``echo`` backend and the ``emphasis`` variant family.

Each is one declaration, named by an entry point in this package's pyproject.toml; the
code they name is imported only when a run uses them.
"""

from sago_core.registry.backends import BackendSpec
from sago_core.registry.families import FamilySpec

ECHO = BackendSpec(
    "echo",
    "sago_example_plugin.echo:open_target",
    "none",  # no weights to resolve, no endpoint to call
    frozenset({"activations", "logprobs"}),
    summary="answers with the question it was asked, deterministically",
)

EMPHASIS = FamilySpec(
    "emphasis",
    ("upper", "stars"),
    filtered=False,  # the words are the same words: meaning is kept by construction
    transform="sago_example_plugin.emphasis:emphasise",
    strengths=(1, 2),
    positions=("global",),
    summary="one or two words stressed, in capitals or between asterisks",
)
