"""What the editor asks about a finding: its quick fixes, fix-all (``source.fixAll.gradguard``, verified by
re-analysing the fixed code on the lane) and hover. State lives on the :class:`~gradguard.lsp.server.Controller`;
this object answers ``textDocument/codeAction`` and ``textDocument/hover`` from it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from lsprotocol import types as T

from gradguard.lsp.convert import FIX_ALL_KIND, SOURCE, Entry
from gradguard.model import Finding

if TYPE_CHECKING:
    from gradguard.lsp.server import Controller, Result, Unit


class CodeActions:
    """Code actions and hover for the documents a :class:`Controller` holds."""

    def __init__(self, c: Controller) -> None:
        self.c = c

    def entries_at(self, uri: str, rng: T.Range) -> tuple[Unit | None, list[Entry]]:
        u = self.c.unit_for(uri)
        if u is None or u.result is None:
            return u, []
        out = []
        for e in [*u.result.entries, *self.c.elsewhere_entries(u)]:
            if e.uri != uri:
                continue
            r = e.diagnostic.range
            if (r.end.line, r.end.character) < (rng.start.line, rng.start.character) or \
                    (rng.end.line, rng.end.character) < (r.start.line, r.start.character):
                continue
            out.append(e)
        return u, out

    def verify_fixes(self, r: Result) -> set[int]:
        """Runs in a worker thread: which findings' preferred safe fixes really remove them, applied together (the
        same check as ``gradguard check --fix``: a fix that leaves its finding is never applied on save)."""
        from gradguard.api import check_text
        from gradguard.fixes import verify_round

        def recheck(text: str) -> list[Finding]:
            return check_text(text, r.path, r.config, fixes=True, project=r.project).findings

        try:
            chosen, _, _, _ = verify_round(r.text, [f for f in r.findings if f.code != "GG000"], recheck)
        except Exception as e:  # an analyzer bug: no fix-all rather than a broken server
            self.c.log_error(f"gradguard: internal error while verifying fixes: {e}", once=True)
            return set()
        return {id(f) for f, _ in chosen}

    async def fix_all_edit(self, u: Unit) -> tuple[T.WorkspaceEdit | None, int]:
        """One edit applying every finding's preferred safe fix that holds (non-overlapping; never noqa)."""
        edit, n, _ = await self.fix_all_plan(u)
        return edit, n

    async def fix_all_plan(self, u: Unit) -> tuple[T.WorkspaceEdit | None, int, list[tuple[str, str]]]:
        """(the fix-all edit, how many fixes it applies, what it leaves out and why: (short, long) per reason)."""
        r = u.result
        if r is None or not r.parse_ok or r.error:
            return None, 0, []
        if r.verified is None:
            try:
                # On the lane: the recheck uses the warm project (which only the lane may touch).
                verified: set[int] = await asyncio.wrap_future(self.c.lane.submit(self.verify_fixes, r))
            except RuntimeError:  # the pool is shut down: the server is exiting
                return None, 0, []
            r.verified = verified
        chosen: list[tuple[str, T.TextEdit]] = []
        spans: list[tuple[tuple[int, int], tuple[int, int]]] = []
        applied = 0
        unsafe: list[str] = []
        failing: list[str] = []
        for e in r.entries:
            fx = next((x for x in e.fixes if x.fix.preferred), None)
            if fx is None or fx.fix.kind == "noqa":
                continue
            if not fx.fix.safe:
                unsafe.append(str(e.diagnostic.code))
                continue
            if id(e.finding) not in r.verified:
                failing.append(str(e.diagnostic.code))
                continue
            mine = [((m.line, m.column), (m.end_line, m.end_column)) for m in fx.fix.edits]
            if any(not (b1 <= a2 or b2 <= a1) for a1, b1 in mine for a2, b2 in spans):
                continue
            spans.extend(mine)
            chosen.extend(fx.edits)
            applied += 1
        skipped: list[tuple[str, str]] = []
        if unsafe:
            codes = ", ".join(sorted(set(unsafe)))
            skipped.append((f"skips {len(unsafe)} unsafe ({codes}): may change results",
                            f"{len(unsafe)} unsafe fix{'es' if len(unsafe) != 1 else ''} ({codes}): each may change "
                            "what the code computes or its gradients; apply it from its own quick fix after review"))
        if failing:
            codes = ", ".join(sorted(set(failing)))
            skipped.append((f"skips {len(failing)} ({codes}) that would not remove the finding",
                            f"{len(failing)} fix{'es' if len(failing) != 1 else ''} ({codes}) that would not remove "
                            "its finding (checked by re-analysing the fixed code)"))
        if not chosen:
            return None, 0, skipped
        changes: dict[str, list[T.TextEdit]] = {}
        for uri, te in chosen:
            changes.setdefault(uri, []).append(te)
        return T.WorkspaceEdit(changes=changes), applied, skipped

    async def on_code_action(self, params: T.CodeActionParams) -> list[T.CodeAction] | None:
        uri = params.text_document.uri
        if not self.c.settings.enable:
            return None
        unit = self.c.unit_for(uri)
        if unit is not None:
            await self.c.ensure_result(unit)
        only = params.context.only
        u, entries = self.entries_at(uri, params.range)

        def wanted(kind: str) -> bool:
            if not only:
                return True
            return any(kind == o or kind.startswith(f"{o}.") for o in only)

        return await self.code_actions(u, entries, params, wanted)

    async def code_actions(self, u: Unit | None, entries: list[Entry], params: T.CodeActionParams,
                           wanted: Callable[[str], bool]) -> list[T.CodeAction]:
        """Each finding's fixes (titled ``gradguard (GG102): ...``), and fix-all: as ``source.fixAll.gradguard``
        (fix on save) and, where the lightbulb is, as a quick fix that says what it leaves out."""
        from gradguard.lsp.convert import action_title

        actions: list[T.CodeAction] = []
        quick = wanted(T.CodeActionKind.QuickFix)
        shown = []
        if quick:
            ctx = [d for d in params.context.diagnostics if d.source in (SOURCE, None)]
            for e in entries:
                d = e.diagnostic
                if ctx and not any(c.code == d.code and c.range == d.range for c in ctx):
                    continue
                shown.append(e)
                for fx in e.fixes:
                    actions.append(T.CodeAction(
                        title=action_title(str(d.code), fx.fix.title, fx.fix.kind), kind=T.CodeActionKind.QuickFix,
                        diagnostics=[d], is_preferred=True if fx.fix.preferred else None, edit=fx.workspace_edit()))
        in_lightbulb = quick and bool(shown)
        if u is not None and (wanted(FIX_ALL_KIND) or in_lightbulb):
            edit, n, skipped = await self.fix_all_plan(u)
            title = f"gradguard: fix all ({n} safe fix{'es' if n != 1 else ''}" + \
                "".join(f"; {short}" for short, _ in skipped) + ")"
            # In the lightbulb (a quick fix: editors keep source actions out of it) when it does more than this
            # finding's own fix, or leaves something out: the title says what and why. A request without `only`
            # gets it once, so that menus listing every kind do not show it twice.
            lightbulb = edit is not None and in_lightbulb and bool(n > 1 or skipped)
            if edit is not None and wanted(FIX_ALL_KIND) and not (lightbulb and not params.context.only):
                actions.append(T.CodeAction(title=title, kind=FIX_ALL_KIND, edit=edit))
            if lightbulb:
                actions.append(T.CodeAction(title=title, kind=T.CodeActionKind.QuickFix, edit=edit))
            if edit is None and skipped and in_lightbulb and self.c.disabled_support:
                actions.append(T.CodeAction(
                    title=f"gradguard: fix all ({'; '.join(short for short, _ in skipped)})",
                    kind=T.CodeActionKind.QuickFix,
                    disabled=T.CodeActionDisabled(reason="fix all leaves out " + "; ".join(lg for _, lg in skipped))))
        return actions

    # ---------------------------------------------------------------------------------------------- hover
    async def on_hover(self, params: T.HoverParams) -> T.Hover | None:
        uri = params.text_document.uri
        if not self.c.settings.enable:
            return None
        u = self.c.unit_for(uri)
        if u is not None:
            await self.c.ensure_result(u)
        if u is None or u.result is None or u.result.version != self.c.current_version(u):
            return None
        p = params.position
        for e in u.result.entries:
            r = e.diagnostic.range
            if e.uri == uri and (r.start.line, r.start.character) <= (p.line, p.character) <= \
                    (r.end.line, r.end.character):
                from gradguard.lsp.hover import hover_markdown

                md = hover_markdown(e.finding, u.result.lines, u.result.mapper, e.uri)
                return T.Hover(contents=T.MarkupContent(kind=T.MarkupKind.Markdown, value=md), range=r)
        return None
