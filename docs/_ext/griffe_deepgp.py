"""Griffe extension for the docs build: lets the docstrings in src/ stay as they are.

The docstrings are Google style ("Args:") but use reStructuredText markup in their prose. What
would render badly under mkdocstrings (which reads docstrings as Markdown) is fixed here, on
griffe's copy of each docstring; nothing in src/ is changed:

* reST roles (``:func:`fit```, ``:class:`~deepgp.config.ModelConfig```, ``:mod:`.uci```, ...) become
  cross-references: the target is resolved as Sphinx would (the object's own scope and imports,
  then an absolute path, then a unique ``*.name`` match in the package), shown as code, and linked
  when the target has a page. A target that exists but is not rendered (a private helper, an
  internal module) stays plain code. A target that does not exist in deepgp at all is a warning,
  so a stale reference fails ``mkdocs build --strict``. Targets outside deepgp (``torch.*``) stay
  plain code. ``double-backtick`` literals are already Markdown code spans and need nothing.
* reST hyperlinks (```text <https://...>`_``) become Markdown links, and a bulleted list that
  follows a line ending in ":" without the blank line Markdown needs gets that blank line.
* Runtime signatures: ``DeepGPRegressor``'s ``__init__`` signature and the parameter list in its
  docstring are generated when the module is imported (from the settings' declarations), which
  static analysis cannot see either; for the classes named in the ``runtime_signatures`` option
  the class is imported and its ``inspect.signature`` and ``__doc__`` replace the static ones.
* Instance attributes set in ``__init__`` (``self.layers = nn.ModuleList(layers)``) are listed
  without the right-hand side, which is code, not a value.
* Settings: dataclass fields declared as ``name: T = setting(default, "help", ...)`` (deepgp.config)
  get their help text as their docstring, and show their default rather than the ``setting`` call.

Used from mkdocs.yml as ``extensions: [docs/_ext/griffe_deepgp.py:DeepgpDocs]``.
"""

from __future__ import annotations

import ast
import html
import inspect
import logging
import re
from typing import Any

import griffe

# a logger under "mkdocs." so that a warning counts for `mkdocs build --strict`
_log = logging.getLogger("mkdocs.plugins.griffe_deepgp")

# `text <https://...>`_ (reST hyperlink)
_LINK = re.compile(r"`(?P<text>[^`<]+?)\s*<(?P<url>https?://[^>`]+)>`__?")
_LIST_AFTER_COLON = re.compile(r"(?m)^(?P<line>[^\n]*\S:)\n(?=[ ]*[*-] )")
# a Google section title must stay directly above its entries
_SECTION = re.compile(r"\s*[A-Z][A-Za-z ]*:")
# :role:`text` or :py:role:`text`; text may be "title <target>" and may start with ~ or .
_ROLE = re.compile(r"(?<![\w`]):(?:py:)?(?P<role>func|meth|class|mod|data|attr|exc|obj|const):`(?P<text>[^`]+)`")


class DeepgpDocs(griffe.Extension):
    def __init__(
        self,
        runtime_signatures: list[str] | None = None,
        package: str = "deepgp",
    ) -> None:
        super().__init__()
        self.runtime_signatures = runtime_signatures or []
        self.package = package

    # -- hooks --------------------------------------------------------------------------------
    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        if pkg.name != self.package:
            return
        for path in self.runtime_signatures:
            _runtime_signature(loader.modules_collection[path], path)
        for obj in _walk(pkg):
            if obj.is_attribute:
                self._setting_help(obj)
                if "instance-attribute" in obj.labels and "class-attribute" not in obj.labels:
                    obj.value = None
            if obj.docstring is not None:
                text = _LINK.sub(r"[\g<text>](\g<url>)", obj.docstring.value)
                text = _LIST_AFTER_COLON.sub(_blank_line_before_list, text)
                obj.docstring.value = self._convert_roles(obj, text, loader)

    # -- settings -----------------------------------------------------------------------------
    @staticmethod
    def _setting_help(attr: griffe.Attribute) -> None:
        value = attr.value
        if attr.docstring is not None or not isinstance(value, griffe.ExprCall):
            return
        if str(value.function) != "setting":
            return
        args = [a for a in value.arguments if not isinstance(a, griffe.ExprKeyword)]
        keywords = {a.name: a.value for a in value.arguments if isinstance(a, griffe.ExprKeyword)}
        help_expr = keywords.get("help", args[1] if len(args) > 1 else None)
        try:
            text = ast.literal_eval(str(help_expr))
        except (ValueError, SyntaxError):
            return
        if not isinstance(text, str):
            return
        attr.docstring = griffe.Docstring(text[:1].upper() + text[1:] + ".", parent=attr)
        default = keywords.get("default", args[0] if args else None)
        if default is not None:  # show `= 128`, the field's real default, not the setting(...) call
            attr.value = default

    # -- reST roles ---------------------------------------------------------------------------
    def _convert_roles(self, obj: griffe.Object, text: str, loader: griffe.GriffeLoader) -> str:
        def replace(match: re.Match) -> str:
            raw = match["text"].strip()
            title, target = raw, raw
            if m := re.fullmatch(r"(.*?)\s*<(.+)>", raw):  # :func:`title <target>`
                title, target = m[1], m[2]
            short = target.startswith("~")
            target = target.lstrip("~")
            if title == raw:
                title = target.rsplit(".", 1)[-1] if short else target.lstrip(".")
            code = f"<code>{html.escape(title)}</code>"
            if self._is_external(obj, target):
                return code  # outside the package (torch.Tensor, np.ndarray): plain code
            path = self._resolve(obj, target, loader)
            if path is None:
                where = f"{obj.relative_filepath}:{obj.docstring.lineno}" if obj.docstring else obj.path
                _log.warning("%s: %s: cannot resolve :%s:`%s`", where, obj.path, match["role"], match["text"])
                return code
            return f'<autoref identifier="{html.escape(path)}" optional>{code}</autoref>'

        return _ROLE.sub(replace, text)

    def _is_external(self, obj: griffe.Object, target: str) -> bool:
        """A dotted name whose first part is, or is imported from, something other than the package."""
        if target.startswith(".") or "." not in target:
            return False
        head = target.split(".", 1)[0]
        try:
            head = obj.resolve(head)
        except (griffe.NameResolutionError, AttributeError):
            pass
        return head.split(".", 1)[0] != self.package

    def _resolve(self, obj: griffe.Object, target: str, loader: griffe.GriffeLoader) -> str | None:
        relative = target.startswith(".")
        name = target.lstrip(".")
        collection = loader.modules_collection
        candidates = []
        scope: griffe.Object | None = obj
        if relative:  # :mod:`.uci`: relative to the current module (or package)
            scope = obj.module
        head, _, rest = name.partition(".")
        try:
            first = scope.resolve(head)
            candidates.append(f"{first}.{rest}" if rest else first)
        except (griffe.NameResolutionError, AttributeError):
            pass
        if relative:
            candidates.append(f"{obj.module.path}.{name}")
        candidates.append(name)  # an absolute path
        for path in candidates:
            found = _lookup(collection, path)
            if found is not None:
                return found
        # Sphinx's last resort: a unique object in the package whose path ends in ".name"
        matches = {o.canonical_path for o in _walk(collection[self.package]) if o.path.endswith("." + name)}
        if len(matches) == 1:
            return matches.pop()
        return None


def _runtime_signature(cls: griffe.Class, path: str) -> None:
    """Give ``cls`` (a griffe Class) the signature and docstring that the imported class has."""
    runtime = griffe.dynamic_import(path)
    params = [griffe.Parameter("self", kind=griffe.ParameterKind.positional_or_keyword)]
    for p in inspect.signature(runtime).parameters.values():
        params.append(
            griffe.Parameter(
                p.name,
                kind=griffe.ParameterKind(p.kind.description),
                default=None if p.default is p.empty else repr(p.default),
                annotation=None if p.annotation is p.empty else str(p.annotation),
            )
        )
    init = cls.members.get("__init__")
    if init is None or not init.is_function:
        raise ValueError(f"runtime_signatures: {path} has no __init__ to document")
    init.parameters = griffe.Parameters(*params)
    if runtime.__doc__:
        cls.docstring = griffe.Docstring(
            inspect.cleandoc(runtime.__doc__), parent=cls, lineno=cls.docstring.lineno if cls.docstring else None
        )


def _blank_line_before_list(match: re.Match) -> str:
    line = match["line"]
    return f"{line}\n" if _SECTION.fullmatch(line) else f"{line}\n\n"


def _lookup(collection: griffe.ModulesCollection, path: str) -> str | None:
    try:
        found = collection.get_member(path)
    except Exception:  # noqa: BLE001 (unknown path, or an alias to outside the package)
        return None
    if found is None:
        return None
    try:
        return found.final_target.path if found.is_alias else found.path
    except Exception:  # noqa: BLE001
        return path


def _walk(obj: griffe.Object):
    """The object and all its members (not following aliases), depth first."""
    yield obj
    for member in obj.members.values():
        if not member.is_alias:
            yield from _walk(member)
