"""A per-parameter loop's variable used after the loop, as if it were shared state."""

import re

from ..model import Category, Hit, Match, Probe
from ..unit import Unit

_COUNTERISH = re.compile(r"\+=|-=|\bstep\b|['\"]step['\"]|_step\b|count|\.add_\(")
_PER_PARAM = re.compile(r"param|group|grad|tensor|\bp\b|state", re.I)


def _bound_in_loop(m: Match) -> list[str]:
    names = [m.text("v")]
    body = m.anchor.child_by_field_name("body")
    for stmt in body.named_children if body else []:
        if stmt.type == "expression_statement" and stmt.named_children:
            a = stmt.named_children[0]
            if a.type == "assignment":
                left = a.child_by_field_name("left")
                if left is not None and left.type == "identifier":
                    names.append(m.unit.text(left))
    return names


def _check(m: Match) -> Hit | None:
    if not _PER_PARAM.search(m.text("iter")):
        return None
    f = m.unit.enclosing_function(m.anchor)
    if f is None:
        return None
    body_text = m.unit.text(m.anchor)
    if re.search(r"\bbreak\b|\breturn\b", body_text):
        return None  # the loop exits early on purpose: its variable names the found item
    end = Unit.end_line(m.anchor)
    after = m.unit.lines[end : f.end_line]
    after_text = "\n".join(after)
    for name in _bound_in_loop(m):
        if name not in after_text:
            continue
        word = re.compile(rf"(?<![.\w]){re.escape(name)}\b")
        for i, line in enumerate(after):
            hit = word.search(line)
            if hit is None:
                continue
            row = end + i  # 0-based row of this line
            node = m.unit.root.named_descendant_for_point_range(
                (row, hit.start()), (row, hit.end())
            )
            if node is None or node.type != "identifier":
                continue  # inside a string or comment, not code
            code = line.split("#", 1)[0]
            if re.match(
                rf"\s*({re.escape(name)}\s*(=[^=]|,)|for\b|with\b|def\b|except\b)", code
            ) or re.search(
                rf"\bfor\s+[\w, ()]*\b{re.escape(name)}\b[\w, ()]*\s+in\b|\bas\s+{re.escape(name)}\b",
                code,
            ):
                break  # rebound before any use
            if not _COUNTERISH.search(code):
                return (
                    None  # read once after the loop, not used as shared state: too common to flag
                )
            line_no = row + 1
            return Hit(
                line_no,
                line_no,
                note=(
                    f"`{name}` is bound per iteration of the loop at line {Unit.line(m.anchor)} "
                    f"and read after it: it holds only the last element's value."
                ),
            )
    return None


PROBE = Probe(
    id="accum-loop-var-after-loop",
    category=Category.accumulation,
    severity="medium",
    title="per-parameter loop variable used after its loop",
    rationale=(
        "A value bound per parameter (its state, its step counter) and read after the loop "
        "belongs to the last parameter only; used as a shared counter or dtype it silently "
        "applies one parameter's state to all (the FusedAdam shared-step class)."
    ),
    template=None,
    query="(for_statement left: (identifier) @v right: (_) @iter) @anchor",
    predicate=_check,
    references=["https://github.com/deepspeedai/DeepSpeed/pull/8471"],
)
