(function () {
  "use strict";
  // The report's Cases view. Every text from a model or a dataset reaches the page through
  // textContent (never innerHTML), so no answer, rule or conversation can add markup.
  // The data block is the view's JSON, gzip'd, in base64 (_viewer.data_block): the browser's
  // own DecompressionStream reads it, so the page stays one file that needs no network.
  var root = document.getElementById("sp-cases");
  function fail(why) {
    root.appendChild(document.createElement("p")).textContent = "The Cases view cannot show its cases: " + why;
  }
  if (typeof DecompressionStream === "undefined") {
    fail("this browser cannot decompress gzip (DecompressionStream: Chrome 80, Firefox 113, Safari 16.4 and later).");
    return;
  }
  var binary = atob(document.getElementById("sp-cases-data").textContent), bytes = new Uint8Array(binary.length);
  for (var b = 0; b < binary.length; b++) bytes[b] = binary.charCodeAt(b);
  // An error of the view itself is not caught here: it stays the browser's uncaught error.
  new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"))).text()
    .then(function (text) { return JSON.parse(text); })
    .then(view, function (error) { fail("its data did not read (" + error + ")."); });

  function view(D) {
    var S = D.S, C = D.cases, R = D.res, RUNS = D.runs, NR = RUNS.length, BASE = D.baseline;
    var PAGE = 100;
    var LEVELS = D.breakdown === "level", TAGS = D.breakdown === "tag", DOMAINS = D.domains !== false;
    var OUTCOMES = [["", "any outcome"], ["x", "exact match"], ["t", "within tolerance"],
      ["w", "beyond tolerance"], ["fp", "has a false positive"], ["fn", "has a false negative"],
      ["e", "excluded"]];
    var PAIRS = [["", "all cases"], ["won", "won by B (B exact, A not)"], ["lost", "lost by B (A exact, B not)"],
      ["wrong", "both wrong"], ["differ", "A and B predict differently"]];
    var others = [];
    for (var k = 0; k < NR; k++) if (k !== BASE) others.push(k);
    var state = {
      lv: "", d: "", tg: "", facts: {}, run: others.length ? others[0] : BASE, o: "", m: "", et: "",
      b: others.length ? others[0] : -1, pair: "", q: "", sort: "", dir: 1, shown: PAGE, open: {}
    };
    // The view in the page's URL fragment (#o=fn&pair=lost&case=priv-101-l0): a link opens the
    // same filters, sort and open cases. Only what differs from the first view is written.
    var KEYS = ["lv", "d", "tg", "run", "o", "m", "et", "b", "pair", "q", "sort", "dir"];
    var NUMERIC = {run: 1, b: 1, dir: 1};
    var FIRST = {};
    KEYS.forEach(function (key) { FIRST[key] = state[key]; });
    function writeHash() {
      var parts = [];
      KEYS.forEach(function (key) {
        if (state[key] !== FIRST[key]) parts.push(key + "=" + encodeURIComponent(String(state[key])));
      });
      for (var name in state.facts) {
        if (state.facts[name]) parts.push("f." + encodeURIComponent(name) + "=" + encodeURIComponent(state.facts[name]));
      }
      var open = Object.keys(state.open).map(function (i) { return encodeURIComponent(C[+i].id); });
      if (open.length) parts.push("case=" + open.join(","));
      var hash = parts.length ? "#" + parts.join("&") : "";
      if (hash === (location.hash === "#" ? "" : location.hash)) return;
      try {
        history.replaceState(null, "", hash || location.pathname + location.search);
      } catch (error) {
        location.replace(hash || "#");
      }
    }
    function readHash() {
      var text = location.hash.replace(/^#/, "");
      if (!text) return;
      var index = {};
      C.forEach(function (c, i) { index[c.id] = i; });
      text.split("&").forEach(function (part) {
        var at = part.indexOf("=");
        if (at < 0) return;
        var key = decodeURIComponent(part.slice(0, at)), raw = part.slice(at + 1), value = decodeURIComponent(raw);
        if (key === "case") {
          raw.split(",").forEach(function (id) { id = decodeURIComponent(id); if (id in index) state.open[index[id]] = 1; });
        } else if (key.indexOf("f.") === 0) {
          state.facts[key.slice(2)] = value;
          setControl("fact-" + key.slice(2), value);
        } else if (KEYS.indexOf(key) >= 0) {
          state[key] = NUMERIC[key] ? +value : value;
          setControl(key, value);
        }
      });
    }
    function setControl(key, value) {
      var control = controls.querySelector('[data-filter="' + key.replace(/["\\]/g, "\\$&") + '"]');
      if (control) control.value = value;
    }

    function el(tag, cls, text) {
      var e = document.createElement(tag);
      if (cls) e.className = cls;
      if (text !== undefined && text !== null) e.textContent = String(text);
      return e;
    }
    function add(parent) {
      for (var i = 1; i < arguments.length; i++) if (arguments[i]) parent.appendChild(arguments[i]);
      return parent;
    }
    function str(i) { return i === undefined || i === null ? "" : S[i]; }
    function has(list, x) { return !!list && list.indexOf(x) >= 0; }
    function res(run, i) { return R[run][i]; }
    function exact(r) { return !!r && r.o === "x"; }
    function errors(c, r) {
      // [false positives, false negatives] of a scored result.
      var fp = [], fn = [], p = r.p || [];
      for (var a = 0; a < p.length; a++) if (!has(c.g, p[a])) fp.push(p[a]);
      for (var b = 0; b < c.g.length; b++) if (!has(p, c.g[b])) fn.push(c.g[b]);
      return [fp, fn];
    }
    function outcomeText(c, r) {
      if (!r) return "excluded: no result";
      if (r.o === "x") return "exact";
      if (r.o === "e") return "excluded: " + r.why;
      var e = errors(c, r), text = "FP " + e[0].length + " · FN " + e[1].length;
      return r.o === "t" ? text + " (within τ=" + r.tau.toFixed(1) + ")" : text;
    }
    function badge(c, r) {
      var cls = !r || r.o === "e" ? "excl" : r.o === "x" ? "ok" : r.o === "t" ? "tol" : "bad";
      return el("span", "cv-b cv-" + cls, outcomeText(c, r));
    }
    function distinct(get) {
      var seen = {}, out = [];
      for (var i = 0; i < C.length; i++) {
        var v = get(C[i]) || [];
        for (var j = 0; j < v.length; j++) if (!seen.hasOwnProperty(v[j])) { seen[v[j]] = 1; out.push(v[j]); }
      }
      return out.sort();
    }
    function runName(k) { return RUNS[k].label + (k === BASE ? " (baseline)" : ""); }

    // ---- filters ----
    var haystacks = null;
    function haystack(i) {
      if (!haystacks) haystacks = new Array(C.length);
      if (haystacks[i] === undefined) {
        var c = C[i], parts = [c.id, c.d, str(c.cv), str(c.pol), str(c.fw)];
        for (var a = 0; a < c.r.length; a++) parts.push(str(c.r[a][1]));
        for (var name in c.f || {}) parts.push(c.f[name].join(" "));
        for (var k = 0; k < NR; k++) {
          var r = res(k, i);
          if (r) parts.push(str(r.a), str(r.r), str(r.raw), str(r.err));
          if (r && r.j) for (var b = 0; b < r.j.length; b++) parts.push(str(r.j[b][2]));
        }
        haystacks[i] = parts.join("\n").toLowerCase();
      }
      return haystacks[i];
    }
    function outcomeMatches(c, r, o) {
      if (o === "e") return !r || r.o === "e";
      if (!r || r.o === "e") return false;
      if (o === "fp" || o === "fn") return errors(c, r)[o === "fp" ? 0 : 1].length > 0;
      return r.o === o;
    }
    function pairMatches(i, pair) {
      var a = res(BASE, i), b = res(state.b, i);
      if (pair === "won") return exact(b) && !exact(a);
      if (pair === "lost") return exact(a) && !exact(b);
      if (pair === "wrong") return !exact(a) && !exact(b);
      if (pair === "differ") {
        var pa = a && a.o !== "e" ? (a.p || []).join(",") : "excluded";
        var pb = b && b.o !== "e" ? (b.p || []).join(",") : "excluded";
        return pa !== pb;
      }
      return true;
    }
    function matches(i) {
      var c = C[i], r = res(state.run, i);
      if (state.lv && c.lv !== state.lv) return false;
      if (state.d && c.d !== state.d) return false;
      if (state.tg && !has(c.tg, state.tg)) return false;
      for (var name in state.facts) if (state.facts[name] && !has((c.f || {})[name], state.facts[name])) return false;
      if (state.o && !outcomeMatches(c, r, state.o)) return false;
      if (state.m && !(r && has(r.m, state.m))) return false;
      if (state.et) {
        var found = false;
        if (r && r.et) for (var rule in r.et) if (r.et[rule] === state.et) found = true;
        if (!found) return false;
      }
      if (state.pair && state.b >= 0 && !pairMatches(i, state.pair)) return false;
      if (state.q && haystack(i).indexOf(state.q) < 0) return false;
      return true;
    }
    function severity(c, r) {
      if (!r || r.o === "e") return 1e6;
      var e = errors(c, r);
      return e[0].length + e[1].length;
    }
    function sortKey(i) {
      var c = C[i], s = state.sort;
      if (s === "id") return c.id;
      if (s === "lv") return c.lv;
      if (s === "d") return c.d;
      if (s === "g") return c.g.length;
      if (s.indexOf("run") === 0) return severity(c, res(+s.slice(3), i));
      return i;
    }
    function selected() {
      var out = [];
      for (var i = 0; i < C.length; i++) if (matches(i)) out.push(i);
      if (state.sort) {
        var keys = {};
        for (var a = 0; a < out.length; a++) keys[out[a]] = sortKey(out[a]);
        out.sort(function (x, y) {
          var p = keys[x], q = keys[y];
          return (p < q ? -1 : p > q ? 1 : x - y) * state.dir;
        });
      }
      return out;
    }

    // ---- controls ----
    var controls = el("div", "cv-controls"), count = el("p", "cv-count"), pairSelect = null;
    function select(label, options, key, onchange) {
      var wrap = el("label", "cv-f"), s = el("select");
      s.setAttribute("data-filter", key);
      for (var i = 0; i < options.length; i++) {
        var o = el("option", null, options[i][1]);
        o.value = String(options[i][0]);
        add(s, o);
      }
      s.addEventListener("change", function () { onchange(s.value); state.shown = PAGE; render(); });
      add(wrap, el("span", null, label), s);
      add(controls, wrap);
      return s;
    }
    function values(list, all) {
      var out = [["", all]];
      for (var i = 0; i < list.length; i++) out.push([list[i], list[i]]);
      return out;
    }
    function runOptions(list) {
      var out = [];
      for (var i = 0; i < list.length; i++) out.push([list[i], runName(list[i])]);
      return out;
    }
    function pairOptions() {
      var out = [];
      for (var p = 0; p < PAIRS.length; p++) {
        var n = 0;
        if (PAIRS[p][0]) { for (var i = 0; i < C.length; i++) if (pairMatches(i, PAIRS[p][0])) n++; }
        out.push([PAIRS[p][0], PAIRS[p][1] + (PAIRS[p][0] ? " (" + n + ")" : "")]);
      }
      return out;
    }
    function buildControls() {
      var search = el("input", "cv-q");
      search.type = "search";
      search.placeholder = "Search ids, rules, conversations, answers";
      search.setAttribute("data-filter", "q");
      var timer = null;
      search.addEventListener("input", function () {
        clearTimeout(timer);
        timer = setTimeout(function () { state.q = search.value.trim().toLowerCase(); state.shown = PAGE; render(); }, 120);
      });
      add(controls, search);
      if (LEVELS) select("Level", values(distinct(function (c) { return [c.lv]; }), "all levels"), "lv", function (v) { state.lv = v; });
      if (DOMAINS) select("Domain", values(distinct(function (c) { return [c.d]; }), "all domains"), "d", function (v) { state.d = v; });
      if (TAGS) select("Tag", values(distinct(function (c) { return c.tg; }), "all tags"), "tg", function (v) { state.tg = v; });
      D.facts.forEach(function (name) {
        var seen = distinct(function (c) { return (c.f || {})[name]; });
        if (seen.length > 1 && seen.length <= 40) {
          select(name, values(seen, "any"), "fact-" + name, function (v) { state.facts[name] = v; });
        }
      });
      var all = [];
      for (var k = 0; k < NR; k++) all.push(k);
      if (NR > 1) select("Outcome of", runOptions(all), "run", function (v) { state.run = +v; }).value = String(state.run);
      select("Outcome", OUTCOMES, "o", function (v) { state.o = v; });
      if (D.modes) select("Failure mode", values(["FM-V1", "FM-D1", "FM-C1", "FM-C3"], "any"), "m", function (v) { state.m = v; });
      var types = {};
      R.forEach(function (run) { run.forEach(function (r) { if (r && r.et) for (var x in r.et) types[r.et[x]] = 1; }); });
      var typeList = Object.keys(types).sort();
      if (typeList.length > 1) select("Error on a rule of type", values(typeList, "any"), "et", function (v) { state.et = v; });
      if (others.length) {
        if (others.length > 1) {
          select("B", runOptions(others), "b", function (v) {
            state.b = +v;
            var fresh = pairOptions();
            for (var i = 0; i < fresh.length; i++) pairSelect.options[i].textContent = fresh[i][1];
          });
        }
        pairSelect = select("A = " + RUNS[BASE].label + ", B = " + (others.length > 1 ? "chosen" : RUNS[others[0]].label),
          pairOptions(), "pair", function (v) { state.pair = v; });
      }
    }

    // ---- list ----
    var table = el("table", "cv-list"), thead = el("thead"), tbody = el("tbody"), more = el("button", "cv-more");
    var columns = [["id", "Case", "id"]];
    if (LEVELS) columns.push(["lv", "Level", "lv"]);
    if (DOMAINS) columns.push(["d", "Domain", "d"]);
    if (TAGS) columns.push(["tg", "Tags", ""]);
    D.facts.forEach(function (name) { columns.push(["f:" + name, name, ""]); });
    columns.push(["g", "Gold", "g"]);
    for (var r0 = 0; r0 < NR; r0++) columns.push(["run" + r0, runName(r0), "run" + r0]);
    function buildHead() {
      var tr = el("tr");
      columns.forEach(function (col) {
        var th = el("th", col[2] ? "cv-sortable" : null, col[1]);
        if (col[2]) {
          th.setAttribute("data-sort", col[2]);
          th.title = "Sort";
          th.addEventListener("click", function () {
            state.dir = state.sort === col[2] ? -state.dir : 1;
            state.sort = col[2];
            render();
          });
        }
        add(tr, th);
      });
      add(thead, tr);
    }
    function cell(col, c, i) {
      var td = el("td");
      var key = col[0];
      if (key === "id") td.textContent = c.id;
      else if (key === "lv") td.textContent = c.lv;
      else if (key === "d") td.textContent = c.d;
      else if (key === "tg") td.textContent = (c.tg || []).join(", ");
      else if (key.indexOf("f:") === 0) td.textContent = ((c.f || {})[key.slice(2)] || []).join(", ");
      else if (key === "g") td.textContent = c.g.length ? c.g.join(", ") : "none";
      else add(td, badge(c, res(+key.slice(3), i)));
      return td;
    }
    function render() {
      var chosen = selected();
      while (tbody.firstChild) tbody.removeChild(tbody.firstChild);
      var upto = Math.min(chosen.length, state.shown);
      for (var n = 0; n < upto; n++) {
        var i = chosen[n], c = C[i], tr = el("tr", "cv-row");
        tr.setAttribute("data-case", c.id);
        columns.forEach(function (col) { add(tr, cell(col, c, i)); });
        tr.tabIndex = 0;  // Enter or Space opens the case from the keyboard too
        (function (row, index) {
          row.addEventListener("click", function () { toggle(row, index); });
          row.addEventListener("keydown", function (e) {
            if (e.key === "Enter" || e.key === " ") { e.preventDefault(); toggle(row, index); }
          });
        })(tr, i);
        add(tbody, tr);
        if (state.open[i]) add(tbody, detailRow(i)), tr.classList.add("cv-open");
      }
      count.textContent = chosen.length + " of " + C.length + " cases match" +
        (chosen.length > upto ? "; showing the first " + upto : "");
      more.style.display = chosen.length > upto ? "" : "none";
      more.textContent = "Show " + Math.min(PAGE, chosen.length - upto) + " more";
      writeHash();
    }
    function toggle(row, i) {
      if (state.open[i]) {
        delete state.open[i];
        row.classList.remove("cv-open");
        var next = row.nextSibling;
        if (next && next.classList.contains("cv-detail")) tbody.removeChild(next);
      } else {
        state.open[i] = 1;
        row.classList.add("cv-open");
        tbody.insertBefore(detailRow(i), row.nextSibling);
      }
      writeHash();
    }

    // ---- one case ----
    function detailRow(i) {
      var tr = el("tr", "cv-detail"), td = el("td");
      td.colSpan = columns.length;
      add(td, detail(i));
      return add(tr, td);
    }
    function mark(c, r, rule) {
      // The rule's mark for one run: TP / FP / FN, "-" when neither, "no verdict" (per-rule).
      var j = judgmentOf(r, rule);
      if (!r || r.o === "e") return j && j[1] === null ? ["no verdict", "excl"] : ["excluded", "excl"];
      var gold = has(c.g, rule), pred = has(r.p, rule);
      if (j && j[1] === null) return ["no verdict", "excl"];
      if (gold && pred) return ["TP", "ok"];
      if (pred) return ["FP", "bad"];
      if (gold) return ["FN", "bad"];
      return ["–", "none"];
    }
    function judgmentOf(r, rule) {
      if (!r || !r.j) return null;
      for (var a = 0; a < r.j.length; a++) if (r.j[a][0] === rule) return r.j[a];
      return null;
    }
    function dl(items) {
      var list = el("dl", "cv-meta");
      items.forEach(function (item) { if (item[1] !== "") add(list, el("dt", null, item[0]), el("dd", null, item[1])); });
      return list;
    }
    function rulesTable(c, i) {
      var t = el("table", "cv-rules"), head = el("tr");
      ["Rule", "Type", "Text"].forEach(function (h) { add(head, el("th", null, h)); });
      for (var k = 0; k < NR; k++) add(head, el("th", null, RUNS[k].label));
      add(t, add(el("thead"), head));
      var body = el("tbody"), rows = c.r.slice(), known = {};
      rows.forEach(function (x) { known[x[0]] = 1; });
      for (var k2 = 0; k2 < NR; k2++) {
        var r = res(k2, i), extra = (r && r.p ? r.p : []).concat(r && r.j ? r.j.map(function (j) { return j[0]; }) : []);
        extra.concat(c.g).forEach(function (rule) {
          if (!known[rule]) { known[rule] = 1; rows.push([rule, null, null]); }
        });
      }
      rows.sort(function (x, y) { return x[0] - y[0]; });
      rows.forEach(function (x) {
        var rule = x[0], tr = el("tr", has(c.g, rule) ? "cv-gold" : null);
        tr.setAttribute("data-rule", String(rule));
        add(tr, el("td", null, rule + (has(c.g, rule) ? " gold" : "")));
        var type = el("td", null, x[2] || "");
        if (x[3]) add(type, el("span", "cv-flag", x[3]));
        add(tr, type, el("td", x[1] === null ? "cv-missing" : null, x[1] === null ? "(not a rule of this policy)" : str(x[1])));
        for (var k3 = 0; k3 < NR; k3++) {
          var r3 = res(k3, i), m = mark(c, r3, rule), td = el("td", "cv-mark");
          add(td, el("span", "cv-b cv-" + m[1], m[0]));
          // An error's type where it is not the rule's own (a flagged waived rule is an exception error).
          if (r3 && r3.et && r3.et[rule] && r3.et[rule] !== x[2]) add(td, el("div", "cv-sub", "counts as " + r3.et[rule]));
          var j = judgmentOf(r3, rule);
          if (j) {
            add(td, el("div", "cv-verdict", j[1] === null ? "no verdict" : j[1] ? "violated" : "not violated"));
            if (j[2] !== null) add(td, el("div", "cv-reason", str(j[2])));
          }
          add(tr, td);
        }
        add(body, tr);
      });
      return add(t, body);
    }
    function money(x) { return x >= 0.01 ? "$" + x.toFixed(4) : "$" + x.toFixed(6); }
    function runPanel(c, i, k) {
      var r = res(k, i), panel = el("div", "cv-run");
      panel.setAttribute("data-run", RUNS[k].label);
      add(panel, el("h5", null, runName(k)), badge(c, r));
      if (!r) return panel;
      var items = [["predicted", r.o === "e" ? "none (excluded)" : (r.p || []).length ? r.p.join(", ") : "none"]];
      if (r.m) items.push(["failure modes", r.m.join(", ")]);
      if (r.st) items.push(["answer read as", r.st]);
      if (r.tk) items.push(["tokens", r.tk[0] + " in, " + r.tk[1] + " out"]);
      if (r.usd !== undefined) items.push(["cost", money(r.usd)]);
      if (r.n !== undefined) items.push(["LM calls", String(r.n)]);
      if (r.s !== undefined) items.push(["latency", r.s.toFixed(2) + " s"]);
      items.push(["cache hits", r.h ? String(r.h) : "0"]);
      if (r.drop) items.push(["dropped", "rule numbers " + r.drop.join(", ") + " are not rules of this policy"]);
      add(panel, dl(items));
      [["a", "Analysis"], ["r", "Reasoning"], ["raw", "Raw answer (not read cleanly)"], ["err", "Error"]].forEach(function (f) {
        if (r[f[0]] !== undefined) add(panel, el("div", "cv-label", f[1]), el("div", "cv-text cv-" + f[0], str(r[f[0]])));
      });
      return panel;
    }
    function detail(i) {
      var c = C[i], box = el("div", "cv-case"), facts = [["gold rules", c.g.length ? c.g.join(", ") : "none"]];
      if (LEVELS) facts.push(["level", c.lv]);
      if (DOMAINS) facts.push(["domain", c.d]);
      if (c.tg) facts.push(["tags", c.tg.join(", ")]);
      for (var name in c.f || {}) facts.push([name, c.f[name].join(", ")]);
      add(box, el("h4", null, c.id), dl(facts));
      var runs = el("div", "cv-runs");
      runs.style.gridTemplateColumns = "repeat(" + NR + ", minmax(0, 1fr))";
      for (var k = 0; k < NR; k++) add(runs, runPanel(c, i, k));
      add(box, runs);
      if (c.r.length || NR) add(box, el("div", "cv-label", "Policy rules"), rulesTable(c, i));
      if (c.pol !== undefined) add(box, el("div", "cv-label", "Policy"), el("div", "cv-text", str(c.pol)));
      if (c.fw !== undefined) {
        var framework = el("details", "cv-fw");
        add(framework, el("summary", null, "Regulatory framework"), el("div", "cv-text", str(c.fw)));
        add(box, framework);
      }
      var conv = el("details", "cv-conv");
      conv.open = true;
      add(conv, el("summary", null, "Conversation"), el("div", "cv-text", str(c.cv)));
      return add(box, conv);
    }

    buildControls();
    readHash();
    buildHead();
    more.type = "button";
    more.addEventListener("click", function () { state.shown += PAGE; render(); });
    add(table, thead, tbody);
    add(root, controls, count, table, more);
    render();
    root.setAttribute("data-ready", "1");
    // For profiling (benchmarks/bench_viewer.py): when the first rows are on the page.
    if (window.performance && performance.mark) performance.mark("sp-cases-ready");
  }
})();
