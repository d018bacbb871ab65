// nbjax widgets: the browser side of nbjax.notebook's views, loaded by anywidget.
//
// The kernel sends the whole view state as JSON traitlets (see nbjax/notebook/widgets.py);
// this module only renders it and writes back what the user chose: the open tab (`tab`),
// the selected node (`selected`), the current step of a step-through (`step`), whether
// to draw every node of a large graph (`show_all`), how to group the graph's equations
// (`group`: "line", "function" or ""), and whether the graph leaves out the identities
// (`hide_identities`). No build step: a plain ES module.
//
// The SVG graphs and coloured jaxprs arrive as markup generated (and escaped) by the
// kernel; every other text is inserted with textContent. Stable `data-testid` attributes
// (listed in nbjax/notebook/__init__.py) let browser tests find the parts.

const PANE_TITLES = {
  graph: "Graph", source: "Source", jaxpr: "Jaxpr", fusion: "Fusion", code: "Code", timing: "Timing",
  linked: "Side by side", steps: "Step through", memory: "Memory",
};
const PLAY_INTERVAL_MS = 800;
// A source line's amber tint: from HEAT_MIN (no time) to HEAT_MIN + HEAT_SPAN (the hottest),
// light enough for the theme's text to keep its contrast on light and dark themes
// (nbjax/notebook/static.py's heat() uses the same numbers).
const HEAT_MIN = 0.06, HEAT_SPAN = 0.34;
const GROUP_CHOICES = { "": "no grouping", line: "group by line", function: "group by function" };

// --- small helpers ------------------------------------------------------------------------

// Replace an element's children, skipping absent ones (replaceChildren prints null as "null").
function setChildren(el, ...children) {
  el.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
}

function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "testid") el.setAttribute("data-testid", value);
    else if (key === "class") el.className = value;
    else if (key === "onclick") el.addEventListener("click", value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

function seconds(s) {
  if (s === null || s === undefined) return "–";
  if (s >= 1) return `${s.toPrecision(3)} s`;
  if (s >= 1e-3) return `${(s * 1e3).toPrecision(3)} ms`;
  if (s >= 1e-6) return `${(s * 1e6).toPrecision(3)} µs`;
  return `${(s * 1e9).toPrecision(3)} ns`;
}

function number(x, unit = "") {
  return x === null || x === undefined ? "–" : `${Number(x.toPrecision(3)).toLocaleString()}${unit}`;
}

function bytes(n) {
  for (const [unit, scale] of [["GB", 1e9], ["MB", 1e6], ["kB", 1e3]]) {
    if (n >= scale) return `${(n / scale).toPrecision(3)} ${unit}`;
  }
  return `${n} B`;
}

function table(header, rows, attrs = {}) {
  return h("table", { class: "nbjax-table", ...attrs },
    h("thead", {}, h("tr", {}, header.map((c) => h("th", {}, c)))),
    h("tbody", {}, rows.map((r) => (r instanceof Node ? r : h("tr", {}, r.map((c) => h("td", {}, c)))))));
}

// Text with every NaN and inf in a red <span class="nbjax-nonfinite">.
function withNonFinite(text) {
  return String(text).split(/\b(nan|inf|NaN)\b/).map((part, i) =>
    (i % 2 ? h("span", { class: "nbjax-nonfinite" }, part) : part));
}

function markup(html, attrs = {}) {
  // Markup generated and escaped by the kernel (SVG from Graphviz, coloured jaxprs).
  const el = h("div", attrs);
  el.innerHTML = html;
  return el;
}

function sparkline(values, width = 260, height = 44) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
  svg.setAttribute("class", "nbjax-sparkline");
  svg.setAttribute("data-testid", "nbjax-sparkline");
  svg.setAttribute("data-points", values.length);
  if (values.length >= 2) {
    const top = Math.max(...values), bottom = Math.min(...values);
    const span = top - bottom || 1;
    const step = width / (values.length - 1);
    const line = document.createElementNS(ns, "polyline");
    line.setAttribute("points", values.map((v, i) =>
      `${(i * step).toFixed(1)},${(height - 2 - ((v - bottom) / span) * (height - 4)).toFixed(1)}`).join(" "));
    svg.append(line);
  }
  return svg;
}

// --- a Graphviz graph with clickable nodes -------------------------------------------------

// The SVG fits the width of its box (never enlarged past its natural size, never shrunk
// below MIN_FIT_SCALE: past that it scrolls; both bounds times the view's `scale` when
// presenting) and opens at the top left, on the inputs.
// Zoom with the buttons or Ctrl+wheel, pan by dragging or scrolling; the search box
// outlines the nodes whose text (operation, variables, types, id) contains the query.
// Zooming resizes the SVG inside a scrolling box, so the browser does the panning.
const MIN_FIT_SCALE = 0.5;
const ZOOM_STEP = 1.25;
const PT_TO_PX = 4 / 3;  // Graphviz sizes SVGs in points

class Graph {
  // state: {svg, note, prefix, nodes, truncated, shown, hidden, budget, group,
  //         hide_identities, identities_hidden}
  // onOption(name, value): the user chose how to draw the graph ("group": how to group the
  // equations, "hide_identities": whether to leave them out); no such controls without it
  constructor(state, onSelect, testid = "nbjax-graph", onOption = null) {
    this.state = state;
    this.onOption = onOption;
    this.nodes = new Map();  // node id -> <g>
    this.el = h("div", { class: "nbjax-graph", testid });
    if (!state) return;
    if (!state.svg) {
      this.el.append(h("p", { class: "nbjax-note", testid: "nbjax-graph-note" }, state.note || "no graph"));
      return;
    }
    this.viewport = markup(state.svg, { class: "nbjax-svg", testid: "nbjax-graph-viewport" });
    this.svg = this.viewport.querySelector("svg");
    this.el.append(this.toolbar(), this.viewport);
    const prefix = state.prefix || "";
    for (const g of this.el.querySelectorAll("g.node")) {
      if (!g.id.startsWith(prefix)) continue;
      const id = g.id.slice(prefix.length);
      this.nodes.set(id, g);
      g.setAttribute("data-testid", `nbjax-node-${id}`);
      g.addEventListener("click", (event) => { event.stopPropagation(); onSelect(id); });
    }
    for (const g of this.el.querySelectorAll("g.cluster")) {
      const match = g.id.slice(prefix.length).match(/^group-(.+)$/);
      if (g.id.startsWith(prefix) && match) g.setAttribute("data-testid", `nbjax-kernel-${match[1]}`);
    }
    this.setUpZoom();
  }

  toolbar() {
    const button = (label, testid, title, action) =>
      h("button", { class: "nbjax-button", testid, title, onclick: action }, label);
    this.search = h("input", { type: "search", class: "nbjax-search", placeholder: "find node…", testid: "nbjax-graph-search" });
    this.search.addEventListener("input", () => this.find(this.search.value));
    this.found = h("span", { class: "nbjax-note", testid: "nbjax-graph-found" });
    return h("div", { class: "nbjax-buttons nbjax-graph-tools" },
      button("−", "nbjax-graph-zoom-out", "zoom out (or Ctrl+wheel)", () => this.zoomBy(1 / ZOOM_STEP)),
      button("+", "nbjax-graph-zoom-in", "zoom in (or Ctrl+wheel)", () => this.zoomBy(ZOOM_STEP)),
      button("fit", "nbjax-graph-fit", "fit the width of the box", () => this.fit()),
      this.groupSelector(), this.identityToggle(), this.search, this.found);
  }

  groupSelector() {
    // Clusters per source line or Python function (click a group's node to fold it).
    if (!this.onOption) return null;
    const current = this.state.group || "";
    const select = h("select", { class: "nbjax-search nbjax-group-select", testid: "nbjax-graph-group",
      title: "cluster the equations by the source line or the function they came from" },
    Object.entries(GROUP_CHOICES).map(([value, label]) =>
      h("option", { value, selected: value === current }, label)));
    select.addEventListener("change", () => this.onOption("group", select.value));
    return select;
  }

  identityToggle() {
    // Leave out the equations that change nothing (mul x 1.0); the kernel redraws.
    if (!this.onOption) return null;
    const hidden = this.state.identities_hidden || 0;
    const box = h("input", { type: "checkbox", testid: "nbjax-graph-hide-identities",
      checked: !!this.state.hide_identities });
    box.addEventListener("change", () => this.onOption("hide_identities", box.checked));
    return h("label", { class: "nbjax-note", title: "leave out x·1, x−0 and other equations that return an operand unchanged (the jaxpr text keeps them)" },
      box, this.state.hide_identities ? ` hide identities (${hidden} hidden)` : " hide identities");
  }

  setUpZoom() {
    const box = this.svg.viewBox.baseVal;
    this.natural = { width: box.width * PT_TO_PX, height: box.height * PT_TO_PX };
    this.zoomed = false;  // until the user zooms, the graph follows its box's width
    this.scale = 1;
    this.apply(1);
    new ResizeObserver(() => { if (!this.zoomed) this.fit(false); }).observe(this.viewport);
    this.viewport.addEventListener("wheel", (event) => {
      if (!event.ctrlKey && !event.metaKey) return;
      event.preventDefault();
      this.zoomBy(event.deltaY < 0 ? ZOOM_STEP : 1 / ZOOM_STEP, event);
    }, { passive: false });
    this.setUpPan();
  }

  setUpPan() {
    let drag = null;
    this.viewport.addEventListener("pointerdown", (event) => {
      if (event.button !== 0 || event.target === this.search) return;
      drag = { x: event.clientX, y: event.clientY, left: this.viewport.scrollLeft, top: this.viewport.scrollTop, moved: false };
    });
    this.viewport.addEventListener("pointermove", (event) => {
      if (!drag) return;
      const dx = event.clientX - drag.x, dy = event.clientY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
      if (!drag.moved) return;
      this.viewport.classList.add("nbjax-panning");
      this.viewport.scrollLeft = drag.left - dx;
      this.viewport.scrollTop = drag.top - dy;
    });
    const end = () => { this.viewport.classList.remove("nbjax-panning"); setTimeout(() => { drag = null; }, 0); };
    this.viewport.addEventListener("pointerup", end);
    this.viewport.addEventListener("pointerleave", end);
    // a drag that ends on a node is a pan, not a click on the node
    this.viewport.addEventListener("click", (event) => { if (drag && drag.moved) event.stopPropagation(); }, true);
  }

  apply(scale) {
    this.scale = scale;
    this.svg.setAttribute("width", `${this.natural.width * scale}px`);
    this.svg.setAttribute("height", `${this.natural.height * scale}px`);
    this.el.setAttribute("data-zoom", scale.toFixed(3));
  }

  fit(byUser = true) {
    const width = this.viewport.clientWidth;
    if (!width) return;
    if (byUser) this.zoomed = false;
    const big = Number(this.el.closest(".nbjax-root")?.dataset.scale || 1);
    this.apply(Math.max(MIN_FIT_SCALE * big, Math.min(big, (width - 4) / this.natural.width)));
    this.viewport.scrollLeft = 0;
    this.viewport.scrollTop = 0;
  }

  zoomBy(factor, at = null) {
    // keep the point under the pointer (or the centre of the box) where it is
    const rect = this.viewport.getBoundingClientRect();
    const px = at ? at.clientX - rect.left : this.viewport.clientWidth / 2;
    const py = at ? at.clientY - rect.top : this.viewport.clientHeight / 2;
    const x = (this.viewport.scrollLeft + px) / this.scale, y = (this.viewport.scrollTop + py) / this.scale;
    this.zoomed = true;
    this.apply(Math.min(8, Math.max(0.05, this.scale * factor)));
    this.viewport.scrollLeft = x * this.scale - px;
    this.viewport.scrollTop = y * this.scale - py;
  }

  find(query) {
    const q = query.trim().toLowerCase();
    const hits = [];
    for (const [id, g] of this.nodes) {
      const hit = q !== "" && `${id} ${g.textContent}`.toLowerCase().includes(q);
      g.classList.toggle("nbjax-found", hit);
      if (hit) hits.push(id);
    }
    this.found.textContent = q ? `${hits.length} found` : "";
    this.el.setAttribute("data-found", hits.length);
    if (hits.length) this.scrollTo(hits[0]);
  }

  mark(cls, ids) {
    for (const g of this.el.querySelectorAll(`g.${cls}`)) g.classList.remove(cls);
    for (const id of ids) this.nodes.get(id)?.classList.add(cls);
  }

  scrollTo(id) {
    // scroll the graph's own box (not the page) to centre the node
    const g = this.nodes.get(id);
    if (!g || !this.viewport) return;
    const box = this.viewport.getBoundingClientRect(), r = g.getBoundingClientRect();
    this.viewport.scrollLeft += r.left + r.width / 2 - (box.left + box.width / 2);
    this.viewport.scrollTop += r.top + r.height / 2 - (box.top + box.height / 2);
  }
}

// What a source line produced: its kernels, else its forward and backward equations, else
// its equations (source_pane.produced_text writes the same for the static copy).
function producedText(line) {
  const n = line.nodes.length, k = line.kernels.length, b = line.backward || 0;
  if (!n) return "";
  if (k) return `${k} kernel${k === 1 ? "" : "s"}`;
  if (b) return `${n - b} fwd, ${b} bwd`;
  return `${n} equation${n === 1 ? "" : "s"}`;
}

function detailsOf(node) {
  // The node's details as a definition list.
  if (!node) return h("p", { class: "nbjax-note" }, "Click a node to see its equation, type, source line and kernel.");
  const rows = [
    ["argument", node.name],
    ["equation", node.text],
    ["type", (node.avals || []).join(", ")],
    ["value", node.value],
    ["source", node.source && `${node.source}${node.source_text ? ":  " + node.source_text : ""}`],
    ["from", node.origin && `${node.phase || ""} part of ${node.origin} (operation ${node.provenance})`],
    ["kernel", node.kernel],
    ["fusion", node.fusion_reason],
    ["faded", node.dim],
  ].filter(([, v]) => v);
  return h("dl", { class: "nbjax-details-list" }, rows.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

// --- the frame shared by both views: title, status, tabs -----------------------------------

class View {
  constructor(model, root) {
    this.model = model;
    this.root = root;
    this.head = h("div", { class: "nbjax-head" });
    this.tabs = h("div", { class: "nbjax-tabs", role: "tablist" });
    this.body = h("div", { class: "nbjax-body" });
    root.append(this.head, this.tabs, this.body);
    this.panes = {};
  }

  get(name) { return this.model.get(name); }

  set(name, value) {
    this.model.set(name, value);
    this.model.save_changes();
  }

  drawHead(extra = []) {
    const status = this.get("status") || {};
    this.root.setAttribute("data-state", status.state || "waiting");
    this.head.replaceChildren(
      h("span", { class: "nbjax-title", testid: "nbjax-title" }, this.get("title")),
      h("span", { class: `nbjax-status nbjax-status-${status.state || "waiting"}`, testid: "nbjax-status" },
        status.message || ""),
      ...extra);
  }

  drawTabs() {
    const panes = this.get("panes") || [];
    const open = panes.includes(this.get("tab")) ? this.get("tab") : panes[0];
    this.tabs.replaceChildren(...panes.map((p) => h("button", {
      class: `nbjax-tab${p === open ? " nbjax-tab-open" : ""}`, role: "tab",
      "aria-selected": p === open ? "true" : "false", testid: `nbjax-tab-${p}`,
      onclick: () => this.set("tab", p),
    }, PANE_TITLES[p] || p)));
    for (const [name, pane] of Object.entries(this.panes)) pane.hidden = name !== open;
    // One graph for two panes: it sits beside the source lines while the Source pane is open.
    if (!this.graph || !this.graph.el) return;
    if (open === "source" && this.sourceGraphSlot) this.sourceGraphSlot.append(this.graph.el);
    else if (this.graphLayout && this.graph.el.parentNode !== this.graphLayout) this.graphLayout.prepend(this.graph.el);
  }

  clusterButtons(graph, id) {
    // Open or close the sub-jaxprs (cond branches, scan bodies...) of the selected node,
    // or the folded repeat ("× N") it belongs to.
    const owned = ((graph && graph.clusters) || []).filter(
      (cl) => cl.owner === id || (cl.members || []).includes(id));
    if (!owned.length) return null;
    const toggle = (cid) => {
      const toggled = new Set(this.get("toggled") || []);
      if (toggled.has(cid)) toggled.delete(cid); else toggled.add(cid);
      this.set("toggled", [...toggled]);
    };
    return h("div", { class: "nbjax-buttons" }, owned.map((cl) => h("button", {
      class: "nbjax-button", testid: `nbjax-toggle-${cl.id}`, onclick: () => toggle(cl.id),
    }, `${cl.collapsed ? "▸ open" : "▾ close"} ${cl.name} (${cl.size} nodes)`)));
  }

  placeholder() {
    // What a pane shows before there is anything to show. After an error, the status line
    // above already says what went wrong: the panes do not repeat it.
    const status = this.get("status") || {};
    const text = status.state === "error" ? "Nothing to show: see the error above." : status.message || "";
    return h("p", { class: "nbjax-note nbjax-waiting" }, text);
  }

  drawPlaceholders() {
    for (const p of this.get("panes") || []) this.pane(p, this.placeholder());
    this.drawTabs();
  }

  pane(name, ...content) {
    // (Re)fill the container of one pane.
    let pane = this.panes[name];
    if (!pane) {
      pane = this.panes[name] = h("div", { class: "nbjax-pane", role: "tabpanel", testid: `nbjax-pane-${name}` });
      this.body.append(pane);
    }
    setChildren(pane, ...content);
    return pane;
  }

  // -- the annotated source: lines coloured by the time (or equations) they produced --

  drawSource(s) {
    // The annotated source of a view (source_pane.source_lines): each line tinted by the
    // time (or the equations) it produced, clickable to its graph nodes and decisions.
    this.sourceRows = [];
    this.sourceLine = null;
    const files = s.files.map((file, f) => h("div", { class: "nbjax-source-file" },
      h("h4", {}, `${file.label} `, h("span", { class: "nbjax-note" }, `(${file.functions.join(", ")})`)),
      h("table", { class: "nbjax-source-lines" }, h("tbody", {}, file.lines.map((line) => {
        const produced = line.nodes.length > 0;
        const time = h("td", { class: "nbjax-line-time" });
        const tr = h("tr", {
          class: produced ? "nbjax-source-line nbjax-produced" : "nbjax-source-line",
          testid: `nbjax-source-line-${f}-${line.line}`, "data-kernels": line.kernels.length,
          title: produced ? `${line.nodes.length} equation(s)` : "",
          onclick: () => produced && this.selectLine(file, line),
        }, h("td", { class: "nbjax-lineno" }, line.line), h("td", { class: "nbjax-line-kernels" }, producedText(line)),
        time, h("td", { class: "nbjax-line-text" }, line.text));
        this.sourceRows.push({ tr, time, line, file });
        return tr;
      })))));
    this.lineDetails = h("div", { class: "nbjax-details", testid: "nbjax-source-details" });
    const decided = s.files.some((file) => file.lines.some((line) => line.decisions.length));
    this.sourceHint = h("p", { class: "nbjax-note" }, s.note, " Click a line to see its equations in the graph",
      decided ? " and the fusion decisions about them." : ".");
    this.lineDetails.append(this.sourceHint);
    // the graph moves here while this pane is open (drawTabs): one SVG, linked to the lines
    this.sourceGraphSlot = h("div", { class: "nbjax-source-graph" });
    this.pane("source", h("div", { class: "nbjax-graph-layout", testid: "nbjax-source" },
      h("div", { class: "nbjax-source-side" }, files, this.lineDetails), this.sourceGraphSlot));
    this.heatSource();
  }

  heatSource() {
    // Time per line from the timing's per-step medians (source_pane.line_seconds), or the
    // number of equations before any call is timed; the hottest line is the most amber.
    if (!this.sourceRows) return;
    const steps = new Map(((this.get("timing") || {}).steps || []).map((st) => [st.index, st.seconds]));
    const timeOf = (line) => (line.shares.length && line.shares.some(([k]) => steps.get(k))
      ? line.shares.reduce((sum, [k, share]) => sum + share * (steps.get(k) || 0), 0) : null);
    const times = this.sourceRows.map((r) => timeOf(r.line));
    const weights = times.some((t) => t) ? times : this.sourceRows.map((r) => r.line.nodes.length);
    const top = Math.max(0, ...weights.map((w) => w || 0)) || 1;
    this.sourceRows.forEach((r, i) => {
      const heat = (weights[i] || 0) / top;
      r.tr.setAttribute("data-heat", heat.toFixed(3));
      r.tr.style.background = r.line.nodes.length ? `rgba(245, 158, 11, ${(HEAT_MIN + HEAT_SPAN * heat).toFixed(2)})` : "";
      r.time.textContent = times[i] === null ? "" : seconds(times[i]);
    });
  }

  selectLine(file, line) {
    // Highlight the line's equations in the graph and list the fusion decisions about them.
    const same = this.sourceLine === line;
    this.sourceLine = same ? null : line;
    for (const r of this.sourceRows) r.tr.classList.toggle("nbjax-selected", r.line === this.sourceLine);
    const nodes = this.sourceLine ? line.nodes : [];
    if (this.graph && this.graph.nodes) {
      this.graph.mark("nbjax-line-node", nodes);
      if (nodes.length) this.graph.scrollTo(nodes.find((n) => this.graph.nodes.has(n)));
    }
    if (!this.sourceLine) return setChildren(this.lineDetails, this.sourceHint);
    const drawn = nodes.filter((n) => this.graph && this.graph.nodes && this.graph.nodes.has(n)).length;
    const steps = line.kernels.length ? ` (plan step${line.kernels.length > 1 ? "s" : ""} ${line.kernels.join(", ")})` : "";
    setChildren(this.lineDetails,
      h("p", {}, `${file.label}, line ${line.line}: ${producedText(line)}${steps}; `,
        `${line.nodes.length} equation(s), ${drawn} drawn in the graph`),
      line.decisions.length ? table(["equation", "step", "decision"], line.decisions.map((d) =>
        h("tr", { class: d.started ? "nbjax-starts" : "" }, h("td", {}, h("code", {}, d.text)), h("td", {}, d.step), h("td", {}, d.reason))),
      { testid: "nbjax-source-decisions" }) : null);
  }
}

// --- the compiler view (%%jit) -------------------------------------------------------------

class JitView extends View {
  constructor(model, root) {
    super(model, root);
    this.codeKernel = 0;
    this.codeMode = 0;  // the stage shown: an index into a kernel's stages
  }

  draw() {
    this.drawHead();
    const c = this.get("compiled") || {};
    const waiting = !c.name;
    for (const p of this.get("panes") || []) {
      if (waiting) this.pane(p, this.placeholder());
      else if (p === "timing") this.drawTiming();
      else this[`draw_${p}`](c);
    }
    this.drawTabs();
    this.drawSelection();
  }

  select(id) { this.set("selected", this.get("selected") === id ? "" : id); }

  draw_graph(c) {
    this.graph = new Graph(c.graph, (id) => this.select(id), "nbjax-graph", (name, value) => this.set(name, value));
    const g = c.graph || {};
    const more = g.truncated
      ? h("p", { class: "nbjax-note" }, `${g.shown} nodes shown, ${g.hidden} hidden (budget ${g.budget}). `,
        h("button", { class: "nbjax-button", testid: "nbjax-show-all", onclick: () => this.set("show_all", true) }, "show all"))
      : null;
    this.details = h("div", { class: "nbjax-details", testid: "nbjax-node-details" });
    this.graphLayout = h("div", { class: "nbjax-graph-layout" }, this.graph.el, this.details);
    this.pane("graph", this.graphLayout, more);
  }

  draw_source(c) { this.drawSource(c.source); }


  draw_jaxpr(c) {
    const j = c.jaxpr;
    const traced = markup(j.traced, { class: "nbjax-jaxpr-text", testid: "nbjax-jaxpr-traced" });
    const optimised = j.optimised ? markup(j.optimised, { class: "nbjax-jaxpr-text", testid: "nbjax-jaxpr-optimised" }) : null;
    this.linkedText = c.graph_of === "optimised" ? optimised : traced;
    for (const span of this.linkedText.querySelectorAll(".nbjax-eqn[data-node]")) {
      span.addEventListener("click", () => this.select(span.getAttribute("data-node")));
    }
    const rewrites = j.rewrites.length
      ? table(["rule", "equation", "detail"], j.rewrites.map((r) => [r.rule, r.eqn, r.detail]))
      : h("p", { class: "nbjax-note" }, "no rewrites");
    this.pane("jaxpr", h("div", { testid: "nbjax-jaxpr" },
      h("h4", {}, "traced"), traced,
      optimised && h("h4", {}, "optimised"), optimised,
      optimised && h("details", {}, h("summary", {}, `rewrites (${j.rewrites.length})`), rewrites)));
  }

  draw_fusion(c) {
    const f = c.fusion;
    if (f.note) return this.pane("fusion", h("p", { class: "nbjax-note", testid: "nbjax-fusion" }, f.note));
    const eqnList = (eqns) => h("div", {}, eqns.map((e) => h("div", {
      class: "nbjax-eqn-link", onclick: () => e.node && this.select(e.node),
    }, e.text)));
    const steps = table(["step", "equations", "bytes in", "bytes out", "flops", "why a step starts here"],
      f.steps.map((s) => h("tr", { testid: `nbjax-fusion-step-${s.index}`, class: `nbjax-step-kind-${s.kind}` },
        h("td", {}, s.label.split(":")[0]), h("td", {}, eqnList(s.eqns)), h("td", {}, bytes(s.bytes_in)),
        h("td", {}, bytes(s.bytes_out)), h("td", {}, number(s.flops)), h("td", {}, s.reason))));
    const decisions = table(["equation", "step", "decision"],
      f.decisions.map((d) => h("tr", { class: d.started ? "nbjax-starts" : "" },
        h("td", {}, eqnList([d])), h("td", {}, d.step), h("td", {}, d.reason))),
      { testid: "nbjax-fusion-decisions" });
    this.pane("fusion", h("div", { testid: "nbjax-fusion" }, steps,
      h("h4", {}, "why each equation went where it did"), decisions));
  }

  draw_code(c) {
    const code = c.code;
    if (!code.kernels.length) return this.pane("code", h("p", { class: "nbjax-note", testid: "nbjax-code" }, code.note));
    const k = code.kernels[Math.min(this.codeKernel, code.kernels.length - 1)];
    // Every stage of the kernel's code, in order (jit_state.code_state): the kernel IR,
    // then the target's (LLVM IR...; on the gpu also PTX and the ptxas report).
    const stages = k.stages;
    const mode = Math.min(this.codeMode, stages.length - 1);
    const redraw = () => this.draw_code(c);
    this.pane("code", h("div", { testid: "nbjax-code" },
      h("div", { class: "nbjax-buttons" }, code.kernels.map((kk, i) => h("button", {
        class: `nbjax-button${kk === k ? " nbjax-on" : ""}`, testid: `nbjax-code-kernel-${kk.name}`,
        onclick: () => { this.codeKernel = i; redraw(); },
      }, kk.name))),
      h("div", { class: "nbjax-buttons" }, stages.map(([label], m) => h("button", {
        class: `nbjax-button${m === mode ? " nbjax-on" : ""}`, testid: `nbjax-code-mode-${m}`,
        onclick: () => { this.codeMode = m; redraw(); },
      }, label))),
      h("pre", { class: "nbjax-code-text", testid: "nbjax-code-text" }, stages[mode][1])));
  }

  drawTiming() {
    const t = this.get("timing") || {};
    if (!t.calls) return this.pane("timing", h("p", { class: "nbjax-note", testid: "nbjax-timing" }, "no calls timed yet"));
    const limits = t.limits || {};
    // Fractions of the machine's measured limits, at most 1 (jit_state._fraction).
    const percent = (f) => (!f ? "" : f >= 1 ? " (at the limit)" : ` (${(100 * f).toFixed(0)}%)`);
    const summary = h("div", { class: "nbjax-timing-summary" },
      h("span", {}, "calls ", h("b", { testid: "nbjax-call-count" }, t.call_count)),
      h("span", {}, "last ", h("b", {}, seconds(t.last_seconds))),
      h("span", {}, "median ", h("b", {}, seconds(t.median_seconds))),
      h("span", {}, "speed-up over NumPy ", h("b", { testid: "nbjax-speedup-numpy" }, number(t.numpy_speedup, "×")),
        h("span", { class: "nbjax-note" }, ` (NumPy, one call per operation: ${seconds(t.numpy_seconds)})`)),
      h("span", {}, "over nbjax eager ", h("b", { testid: "nbjax-speedup" }, number(t.speedup, "×")),
        h("span", { class: "nbjax-note" }, ` (no jit: ${seconds(t.eager_seconds)})`)),
      t.baselines_note ? h("span", { class: "nbjax-note", testid: "nbjax-baselines-note" }, t.baselines_note) : null,
      // The baselines run in the kernel only when asked (watch.WatchedJit.measure_baselines).
      t.baselines_pending ? h("button", {
        class: "nbjax-button", testid: "nbjax-measure-baselines",
        onclick: () => this.set("measure", (this.get("measure") || 0) + 1),
      }, "measure the baselines") : null);
    const phases = table(["compile phase", "time"], t.compile.map((p) => [p.phase, seconds(p.seconds)]),
      { testid: "nbjax-compile-phases" });
    const steps = t.steps.length ? table(["step", "time", "bytes", "GB/s", "GFLOP/s"],
      t.steps.map((s) => [s.label, seconds(s.seconds), bytes(s.bytes_in + s.bytes_out),
        number(s.gbps) + percent(s.bandwidth_fraction), number(s.gflops) + percent(s.flops_fraction)]),
      { testid: "nbjax-step-times" }) : null;
    const machine = limits.gbps ? h("p", { class: "nbjax-note" },
      `this machine: ${number(limits.gbps)} GB/s, ${number(limits.gflops)} GFLOP/s (${limits.how}); percentages are of these`) : null;
    this.pane("timing", h("div", { testid: "nbjax-timing" }, summary,
      h("div", { class: "nbjax-spark" }, sparkline(t.calls), h("span", { class: "nbjax-note" }, `call times (last ${t.calls.length})`)),
      phases, steps, machine));
  }

  drawSelection() {
    const id = this.get("selected");
    const c = this.get("compiled") || {};
    if (this.graph) this.graph.mark("nbjax-selected", id ? [id] : []);
    if (this.details) setChildren(this.details, detailsOf(c.graph && c.graph.nodes[id]), this.clusterButtons(c.graph, id));
    if (this.linkedText) {
      for (const span of this.linkedText.querySelectorAll(".nbjax-eqn[data-node]")) {
        span.classList.toggle("nbjax-selected", span.getAttribute("data-node") === id);
      }
    }
  }

  listen() {
    return {
      "change:compiled": () => this.draw(),
      "change:timing": () => { this.drawHead(); if (this.panes.timing && (this.get("compiled") || {}).name) this.drawTiming(); this.heatSource(); this.drawTabs(); },
      "change:status": () => { this.drawHead(); if (!(this.get("compiled") || {}).name) this.drawPlaceholders(); },
      "change:tab": () => this.drawTabs(),
      "change:selected": () => this.drawSelection(),
    };
  }
}

// --- the gradient view (%%grad) ------------------------------------------------------------

class GradView extends View {
  draw() {
    this.stopPlaying();
    this.drawHead();
    const g = this.get("grad") || {};
    if (!g.rows) {
      this.drawPlaceholders();
      return;
    }
    this.drawLinked(g);
    this.graph = new Graph(g.graph, (id) => this.select(id), "nbjax-graph", (name, value) => this.set(name, value));
    this.graphDetails = h("div", { class: "nbjax-details", testid: "nbjax-node-details" });
    this.graphLayout = h("div", { class: "nbjax-graph-layout" }, this.graph.el, this.graphDetails);
    this.pane("graph", this.graphLayout);
    if (g.source) this.drawSource(g.source);
    this.drawSteps();
    this.drawMemory(g.memory);
    this.pane("jaxpr", markup(g.jaxpr, { testid: "nbjax-grad-jaxpr" }),
      g.hessian ? h("div", {}, h("h4", {}, "Hessian"), markup(g.hessian.jaxpr, { testid: "nbjax-hessian" })) : null);
    this.drawTabs();
    this.drawSelection();
  }

  select(id) { this.set("selected", this.get("selected") === id ? "" : id); }

  drawMemory(m) {
    // What reverse mode keeps from the forward pass for the backward pass, value by value
    // (grad_state.memory_state); forward mode keeps nothing, and says so.
    if (!m) return;
    if (m.note) return this.pane("memory", h("p", { class: "nbjax-note", testid: "nbjax-memory" }, m.note));
    const values = table(["value", "size", "what it is", "computed at"], m.rows.map((r) => [
      h("code", {}, r.type), bytes(r.bytes), r.origin,
      r.source ? `${r.source}${r.source_text ? ":  " + r.source_text : ""}` : ""]),
    { testid: "nbjax-memory-values" });
    this.pane("memory", h("div", { testid: "nbjax-memory" },
      h("p", {}, h("b", { testid: "nbjax-memory-total" }, bytes(m.total)),
        ` kept for the backward pass in ${m.rows.length} values (the differentiated inputs: ${bytes(m.arguments)})`),
      values, h("p", { class: "nbjax-note" }, m.hint)));
  }

  drawLinked(g) {
    this.rows = new Map();
    const column = (side) => h("div", { class: `nbjax-column nbjax-column-${side}`, testid: side === "left" ? "nbjax-grad-forward" : "nbjax-grad-backward" },
      h("h4", {}, g.sides[side]),
      g.rows.filter((r) => r.side === side).map((r) => {
        const row = h("div", {
          class: "nbjax-row", testid: `nbjax-row-${r.id}`, "data-provenance": r.provenance ?? "",
          title: r.source ? `${r.origin} at ${r.source}` : "", onclick: () => this.select(r.id),
        }, h("code", {}, r.text));
        this.rows.set(r.id, row);
        return row;
      }));
    this.linkDetails = h("div", { class: "nbjax-details", testid: "nbjax-link-details" });
    this.pane("linked", h("div", { class: "nbjax-columns" }, column("left"), column("right")), this.linkDetails);
  }

  linkOf(id) {
    const g = this.get("grad") || {};
    const row = (g.rows || []).find((r) => r.id === id);
    return row && row.provenance !== null ? (g.links || []).find((l) => l.provenance === row.provenance) : null;
  }

  drawSelection() {
    const g = this.get("grad") || {};
    const id = this.get("selected");
    const link = id ? this.linkOf(id) : null;
    const peers = link ? [...link.left, ...link.right] : [];
    for (const [rowId, row] of this.rows || []) {
      row.classList.toggle("nbjax-selected", rowId === id);
      row.classList.toggle("nbjax-linked", rowId !== id && peers.includes(rowId));
    }
    if (this.graph) {
      this.graph.mark("nbjax-selected", id ? [id] : []);
      this.graph.mark("nbjax-linked", peers.filter((p) => p !== id));
    }
    if (this.graphDetails) setChildren(this.graphDetails, detailsOf(g.graph && g.graph.nodes[id]), this.clusterButtons(g.graph, id));
    if (this.linkDetails) {
      this.linkDetails.replaceChildren(link
        ? h("p", {}, `${link.origin}${link.source ? " at " + link.source : ""}${link.source_text ? ":  " + link.source_text : ""} — `,
          `${g.sides.left}: ${link.left.join(", ") || "none"}; ${g.sides.right}: ${link.right.join(", ") || "none"}`)
        : h("p", { class: "nbjax-note" }, `Click an equation: the equations of the same operation are highlighted on both sides.`));
    }
  }

  // -- step-through --

  drawSteps() {
    const s = this.get("steps") || {};
    if (!s.steps) return;
    this.stepGraph = new Graph(s.graph, () => {}, "nbjax-stepper-graph");
    this.cells = new Map();
    const rows = s.rows.map((r) => {
      const value = h("td", { class: "nbjax-value", testid: `nbjax-value-${r.id}` });
      const deriv = h("td", { class: "nbjax-deriv", testid: `nbjax-deriv-${r.id}` });
      const tr = h("tr", { testid: `nbjax-step-row-${r.id}` }, h("td", { class: "nbjax-name" }, r.name ?? r.id), h("td", {}, h("code", {}, r.text)), value, deriv);
      this.cells.set(r.id, { tr, value, deriv });
      return tr;
    });
    this.playButton = h("button", { class: "nbjax-button", testid: "nbjax-step-play", onclick: () => this.togglePlay() }, "▶ play");
    this.position = h("span", { class: "nbjax-step-position", testid: "nbjax-step-position" });
    this.stepText = h("div", { class: "nbjax-step-text", testid: "nbjax-step-text" });
    const go = (delta) => () => { this.stopPlaying(); this.goto(this.get("step") + delta); };
    this.pane("steps",
      h("div", { class: "nbjax-buttons" },
        h("button", { class: "nbjax-button", testid: "nbjax-step-reset", onclick: () => { this.stopPlaying(); this.goto(0); } }, "reset"),
        h("button", { class: "nbjax-button", testid: "nbjax-step-prev", onclick: go(-1) }, "◀ back"),
        this.playButton,
        h("button", { class: "nbjax-button", testid: "nbjax-step-next", onclick: go(1) }, "step ▶"),
        this.position),
      h("p", { class: "nbjax-note" }, `seed: ${s.seed}`),
      this.stepText,
      h("div", { class: "nbjax-graph-layout" }, this.stepGraph.el,
        table(["variable", "", "value", s.derivative], rows, { testid: "nbjax-step-table" })));
    this.drawStep();
  }

  goto(k) {
    const n = ((this.get("steps") || {}).steps || []).length;
    this.set("step", Math.max(0, Math.min(n - 1, k)));
  }

  drawStep() {
    const s = this.get("steps") || {};
    if (!s.steps || !this.cells) return;
    const k = Math.max(0, Math.min(s.steps.length - 1, this.get("step")));
    const values = {}, derivs = {};
    for (const step of s.steps.slice(0, k + 1)) {
      Object.assign(values, step.values);
      Object.assign(derivs, step.derivs);
    }
    const current = s.steps[k];
    for (const [id, { tr, value, deriv }] of this.cells) {
      setChildren(value, withNonFinite(values[id] ?? ""));
      setChildren(deriv, withNonFinite(derivs[id] ?? ""));
      tr.classList.toggle("nbjax-current", id === current.node);
      tr.classList.toggle("nbjax-changed", id in current.values || id in current.derivs);
    }
    this.position.textContent = `step ${k + 1} / ${s.steps.length}`;
    const g = this.get("grad") || {};
    const linked = (current.linked || []).map((id) => (g.rows || []).find((r) => r.id === id)).filter(Boolean);
    setChildren(this.stepText, h("b", {}, current.phase), " ", withNonFinite(current.text),
      linked.length ? h("div", { class: "nbjax-note" }, "in the derivative's jaxpr: ", linked.map((r) => r.text).join(";  ")) : null);
    this.stepGraph.mark("nbjax-current", current.node ? [current.node] : []);
    this.stepGraph.mark("nbjax-changed", Object.keys({ ...current.values, ...current.derivs }));
    if (this.timer && k >= s.steps.length - 1) this.stopPlaying();
  }

  togglePlay() {
    if (this.timer) return this.stopPlaying();
    const n = ((this.get("steps") || {}).steps || []).length;
    if (this.get("step") >= n - 1) this.goto(0);
    this.playButton.textContent = "pause";
    this.timer = setInterval(() => this.goto(this.get("step") + 1), PLAY_INTERVAL_MS);
  }

  stopPlaying() {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    if (this.playButton) this.playButton.textContent = "▶ play";
  }

  listen() {
    return {
      "change:grad": () => this.draw(),
      "change:steps": () => this.draw(),
      "change:status": () => { this.drawHead(); if (!(this.get("grad") || {}).rows) this.drawPlaceholders(); },
      "change:tab": () => this.drawTabs(),
      "change:selected": () => this.drawSelection(),
      "change:step": () => this.drawStep(),
    };
  }
}

// --- entry point ---------------------------------------------------------------------------

function render({ model, el }) {
  const kind = model.get("view");
  const root = h("div", { class: "nbjax-root", testid: "nbjax-view", "data-view": kind });
  el.append(root);
  const view = kind === "grad" ? new GradView(model, root) : new JitView(model, root);
  // presenting: larger text (the stylesheet multiplies the font size) and graphs
  const rescale = () => {
    const scale = model.get("scale") || 1;
    root.dataset.scale = String(scale);
    root.style.setProperty("--nbjax-scale", String(scale));
    for (const graph of [view.graph, view.stepGraph]) {
      if (graph && graph.svg && !graph.zoomed) graph.fit(false);
    }
  };
  rescale();
  view.draw();
  const handlers = Object.entries({ ...view.listen(), "change:scale": rescale });
  for (const [event, handler] of handlers) model.on(event, handler);
  return () => {
    if (view.stopPlaying) view.stopPlaying();
    for (const [event, handler] of handlers) model.off(event, handler);
  };
}

export default { render };
