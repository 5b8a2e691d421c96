"""What runs inside a MiniWoB++ page: starting a seeded episode, reading its state, and the element tree.

MiniWoB++'s `core.js` keeps the task's state in globals: `WOB_DONE_GLOBAL`,
`WOB_RAW_REWARD_GLOBAL` (the task's reward before its time discount) and
`WOB_TASK_READY`; `Math.seedrandom(seed)` fixes the problem a task generates.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

START = """
const [seed, limitMs] = arguments;
Math.seedrandom(seed);
core.setDataMode('train');
// Tasks time themselves for a human (7-30 s); a policy that thinks for seconds a step gets at least limitMs.
core.EPISODE_MAX_TIME = Math.max(core.EPISODE_MAX_TIME, limitMs);
core.startEpisodeReal();
return core.EPISODE_MAX_TIME;
"""

READY = "return typeof WOB_TASK_READY === 'undefined' || WOB_TASK_READY === true;"

STATUS = """
return {done: WOB_DONE_GLOBAL === true, raw_reward: WOB_RAW_REWARD_GLOBAL, reason: WOB_REWARD_REASON === null ?
  null : String(WOB_REWARD_REASON)};
"""

# The visible elements a person could act on or read, depth-first, each with an id (`data-oc-id`) that stays the
# element's for the whole episode. Interactive: form controls, links, ARIA widgets, elements with click handlers or
# a pointer cursor (MiniWoB's own widgets are often plain spans), and SVG shapes; readable: elements with own text.
TREE = """
const SKIP = new Set(['reward-display', 'sync-task-cover', 'click-canvas', 'query']);
const TAGS = new Set(['A', 'BUTTON', 'INPUT', 'TEXTAREA', 'SELECT', 'LABEL', 'SUMMARY']);
const ROLES = new Set(['button', 'link', 'tab', 'checkbox', 'radio', 'menuitem', 'option', 'textbox', 'combobox',
                       'slider', 'switch', 'treeitem', 'spinbutton']);
const SHAPES = new Set(['circle', 'rect', 'ellipse', 'polygon', 'path', 'line', 'text']);
window.__ocNext = window.__ocNext || 1;
const rows = [];
const clean = (s, n) => (s || '').replace(/\\s+/g, ' ').trim().slice(0, n);
const own = el => clean(Array.from(el.childNodes).filter(n => n.nodeType === 3).map(n => n.data).join(' '), 120);
function idOf(el) {
  if (!el.dataset.ocId) el.dataset.ocId = String(window.__ocNext++);
  return +el.dataset.ocId;
}
function visible(el, st) {
  const r = el.getBoundingClientRect();
  return r.width > 0 && r.height > 0 && st.visibility !== 'hidden' && st.display !== 'none' && +st.opacity !== 0;
}
function interactive(el, st) {
  if (TAGS.has(el.tagName) || ROLES.has(el.getAttribute('role')) || el.isContentEditable) return true;
  if (el.hasAttribute('onclick') || typeof el.onclick === 'function') return true;
  if (el instanceof SVGElement) return SHAPES.has(el.tagName.toLowerCase());
  const parent = el.parentElement;
  return st.cursor === 'pointer' && !(parent && getComputedStyle(parent).cursor === 'pointer');
}
function describe(el, st) {
  const tag = el.tagName.toLowerCase(), role = el.getAttribute('role');
  const label = clean(el.getAttribute('aria-label') || el.getAttribute('title') || '', 80);
  const row = {role: ROLES.has(role) ? role : tag === 'a' ? 'link' : tag, name: ''};
  if (tag === 'input') {
    const type = (el.type || 'text').toLowerCase();
    row.role = ['checkbox', 'radio', 'button', 'submit', 'range'].includes(type) ? type : 'textbox';
    if (type === 'submit' || type === 'button') row.name = clean(el.value, 80);
    else if (type === 'checkbox' || type === 'radio') row.checked = el.checked;
    else { row.value = el.value; if (type !== 'text') row.type = type; }
    if (el.placeholder) row.placeholder = clean(el.placeholder, 60);
  } else if (tag === 'textarea') {
    row.role = 'textbox'; row.value = el.value;
  } else if (tag === 'select') {
    row.role = 'select';
  } else if (el instanceof SVGElement) {
    row.role = 'svg-' + tag;
    row.name = clean(el.textContent, 40);
    const fill = el.getAttribute('fill') || st.fill;
    if (fill && fill !== 'none') row.color = fill;
  } else {
    row.name = clean(el.textContent, 100);
  }
  if (!row.name && label) row.name = label;
  if (el.disabled) row.disabled = true;
  if (document.activeElement === el) row.focused = true;
  return row;
}
function walk(el, depth) {
  if (SKIP.has(el.id)) return;
  const st = getComputedStyle(el);
  if (!visible(el, st)) return;
  let inner = depth;
  if (interactive(el, st)) {
    rows.push(Object.assign({id: idOf(el), depth: depth}, describe(el, st)));
    inner = depth + 1;
    if (el.tagName === 'SELECT') {
      for (const o of el.options) rows.push({id: idOf(o), depth: inner, role: 'option', name: clean(o.text, 80),
                                              selected: o.selected});
      return;
    }
    if (['BUTTON', 'A', 'TEXTAREA'].includes(el.tagName) || el instanceof SVGElement) return;  // named by their text
  } else {
    const text = own(el);
    if (text) { rows.push({id: idOf(el), depth: depth, role: 'text', name: text}); inner = depth + 1; }
  }
  for (const c of el.children) walk(c, inner);
}
walk(document.body, 0);
const q = core.getUtterance();
return {utterance: typeof q === 'string' ? q : (q && q.utterance) || '', rows: rows};
"""

UNCOVER = "const c = document.getElementById('sync-task-cover'); if (c) c.style.display = 'none';"

FIND = "return document.querySelector('[data-oc-id=\"' + arguments[0] + '\"]');"


class Status(BaseModel):
    done: bool
    raw_reward: float = 0.0
    reason: str | None = None


class Row(BaseModel):
    """One element of the tree."""

    id: int
    depth: int
    role: str
    name: str = ""
    value: str | None = None
    type: str | None = None
    placeholder: str | None = None
    checked: bool | None = None
    selected: bool | None = None
    color: str | None = None
    disabled: bool = False
    focused: bool = False

    def line(self) -> str:
        parts = [f"{'  ' * self.depth}[{self.id}] {self.role}"]
        if self.name:
            parts.append(_quote(self.name))
        if self.type:
            parts.append(f"type={self.type}")
        if self.value is not None:
            parts.append(f"value={_quote(self.value[:100])}")
        if self.placeholder:
            parts.append(f"placeholder={_quote(self.placeholder)}")
        if self.checked is not None:
            parts.append("checked" if self.checked else "unchecked")
        if self.selected:
            parts.append("selected")
        if self.color:
            parts.append(f"color={self.color}")
        if self.disabled:
            parts.append("disabled")
        if self.focused:
            parts.append("focused")
        return " ".join(parts)


class PageState(BaseModel):
    utterance: str
    rows: list[Row] = Field(default_factory=list)

    def ids(self) -> set[int]:
        return {r.id for r in self.rows}

    def row(self, element: int) -> Row | None:
        return next((r for r in self.rows if r.id == element), None)

    def tree(self, max_chars: int) -> str:
        """One line per element; past `max_chars`, the rest is counted, not shown."""
        lines, used = [], 0
        for i, r in enumerate(self.rows):
            line = r.line()
            if used + len(line) + 1 > max_chars:
                lines.append(f"... ({len(self.rows) - i} more elements not shown)")
                break
            lines.append(line)
            used += len(line) + 1
        return "\n".join(lines) or "(no visible elements)"


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
