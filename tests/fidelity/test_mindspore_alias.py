"""`import mindspore` (minispore.mindspore_compat) aliases modules without changing them: the
import system stamps the alias's spec onto the module it is given, and a minispore whose
`__spec__` says 'mindspore' breaks importlib.resources (the packaged corpus) and find_spec
(lint-imports' package finder) for the rest of the process."""
import importlib.util
from importlib import resources

import minispore
from minispore import mindspore_compat


def test_importing_through_the_alias_keeps_minispores_own_spec():
    own = minispore.__spec__
    mindspore_compat.install()
    try:
        import mindspore
        import mindspore.communication  # noqa: F401  (a subpackage through the alias too)
        assert mindspore is minispore
    finally:
        mindspore_compat.uninstall()
    assert minispore.__spec__ is own and minispore.__spec__.name == "minispore"
    assert importlib.util.find_spec("minispore").origin == own.origin
    assert resources.files("minispore").joinpath("data").is_dir()
