// SPDX-License-Identifier: MIT
/*
 * report_page.js - the script of report --html's page (report_html.c
 * embeds it): lays out the summary, the tables and the flame graph from
 * the JSON in <script id="mt-data">.  No library, no network.  Every
 * string from the data goes into the page as text (textContent), never as
 * markup: names come from the tracked programs.
 */
(function () {
  'use strict';
  var D = JSON.parse(document.getElementById('mt-data').textContent);
  var METRICS = {
    peak: 'Heap at the peak', memory: 'Memory at its peak (heap + mapped)',
    allocations: 'Allocations', allocated: 'Bytes allocated', leaked: 'Bytes leaked',
    temporary: 'Temporary allocations'
  };

  function bytes(v) {
    var u = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'], i = 0;
    while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
    return (i ? v.toFixed(1) : v.toFixed(0)) + ' ' + u[i];
  }
  function count(v) { return Number(v).toLocaleString('en-US'); }
  function secs(ns) { return (ns / 1e9).toFixed(3) + ' s'; }
  function age(ns) {
    var s = ns / 1e9;
    return s < 1 ? (s * 1000).toFixed(1) + ' ms' : s < 120 ? s.toFixed(2) + ' s' : (s / 60).toFixed(1) + ' min';
  }
  function pct(v, of) { return of ? (100 * v / of).toFixed(1) + '%' : '-'; }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function svgEl(tag, attrs) {
    var e = document.createElementNS('http://www.w3.org/2000/svg', tag);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    return e;
  }
  function body(id) { return document.querySelector('#' + id + ' .body'); }

  /* a frame [function, file, line, object, inlined] as "file:line" or "[object]" */
  function where(f) {
    if (f[1]) return f[1].replace(/.*\//, '') + ':' + f[2];
    return f[3] ? '[' + f[3] + ']' : '';
  }
  /* a site is named by its first frame outside the allocator (functions.h) */
  function siteFrame(s) { return s.frames[s.fn] || []; }
  function siteName(s) { return s.frames.length ? siteFrame(s)[0] : '(no stack)'; }
  function fnWhere(f) { return f.file ? f.file.replace(/.*\//, '') : f.obj ? '[' + f.obj + ']' : ''; }

  /* ---- header, navigation and summary ---- */
  function header() {
    document.title = 'memtrack: ' + D.command;
    document.getElementById('cmd').textContent = D.command;
    var info = [secs(D.duration_ns)];
    if (D.attached) info.push('attached');
    else if (D.exit) info.push(D.exit.signal ? 'killed by signal ' + D.exit.signal : 'exit ' + D.exit.code);
    if (D.truncated) info.push('file truncated');
    document.getElementById('runinfo').textContent = info.join(' \u00b7 ');
    var nav = document.getElementById('nav');
    [].forEach.call(document.querySelectorAll('main > section'), function (s) {
      var h = s.querySelector('h2');
      var a = el('a', '', h ? h.textContent : 'Summary');
      a.href = '#' + s.id;
      nav.appendChild(a);
    });
  }

  function card(cls, label, value, sub, key, raw) {
    var c = el('div', 'card ' + cls);
    c.appendChild(el('div', 'label', label));
    var v = el('div', 'value', value);
    if (key) { v.setAttribute('data-key', key); v.setAttribute('data-v', raw); v.title = count(raw); }
    c.appendChild(v);
    if (sub) c.appendChild(el('div', 'sub', sub));
    return c;
  }

  function summary() {
    var host = document.getElementById('cards'), nprocs = D.processes.length;
    var rate = D.duration_ns ? D.alloc_count / (D.duration_ns / 1e9) : 0;
    host.appendChild(card('heap', 'Peak heap', bytes(D.peak_heap_bytes), 'at ' + secs(D.peak_heap_ns),
      'peak_heap_bytes', D.peak_heap_bytes));
    if (D.rss)
      host.appendChild(card('rss', 'Peak RSS', bytes(D.peak_rss_bytes), 'at ' + secs(D.peak_rss_ns) + ' (tree)',
        'peak_rss_bytes', D.peak_rss_bytes));
    host.appendChild(card('memory', 'Peak memory', bytes(D.peak_memory_bytes), 'heap + mapped',
      'peak_memory_bytes', D.peak_memory_bytes));
    host.appendChild(card('', 'Allocations', count(D.alloc_count),
      bytes(D.total_allocated_bytes) + ' requested, ' + count(Math.round(rate)) + '/s', 'alloc_count', D.alloc_count));
    host.appendChild(card('leak', 'Leaked', bytes(D.leaked_bytes),
      count(D.leaked_count) + ' allocation' + (D.leaked_count === 1 ? '' : 's') + ' never freed' +
      (D.attached ? '; ' + bytes(D.live_end_bytes) + ' still held at the end' : ''),
      'leaked_bytes', D.leaked_bytes));
    host.appendChild(card('', 'Processes', count(nprocs), secs(D.duration_ns) + ' recorded', 'processes', nprocs));
    host.appendChild(card('', 'Temporary', count(D.temporary_count), pct(D.temporary_count, D.alloc_count) +
      ' of the allocations, ' + count(Math.round(D.duration_ns ? D.temporary_count / (D.duration_ns / 1e9) : 0)) +
      '/s', 'temporary_count', D.temporary_count));
    if (D.dropped) host.appendChild(card('leak', 'Events lost', count(D.dropped), 'numbers are a lower bound',
      'dropped', D.dropped));
    var top = document.getElementById('topsite'), best = null;
    D.functions.forEach(function (f) { if (f.peak && (!best || f.peak > best.peak)) best = f; });
    if (!D.stacks) {
      top.textContent = 'Recorded without call stacks: record with memtrack track (stacks are its default) ' +
        'or memtrack attach --stacks to see where the memory is allocated.';
      return;
    }
    if (!best) { top.textContent = 'No call site held heap memory at the peak.'; return; }
    top.appendChild(document.createTextNode('Most heap at the peak: '));
    var b = el('b', '', best.name);
    b.id = 'topsite-fn';
    top.appendChild(b);
    top.appendChild(el('span', 'where', ' ' + fnWhere(best) + (best.callers.length ?
      ' \u2190 ' + best.callers[0].name : '')));
    var v = el('span', '', ' \u2014 ' + bytes(best.peak) + ', ' + pct(best.peak, D.peak_heap_bytes) +
      ' of the peak, ' + count(best.allocs) + ' allocation' + (best.allocs === 1 ? '' : 's') +
      (best.nsites > 1 ? ' from ' + best.nsites + ' call stacks' : ''));
    v.id = 'topsite-bytes';
    v.setAttribute('data-v', best.peak);
    top.appendChild(v);
  }

  /* ---- sortable tables ---- */
  /*
   * cols: {label, key (number to sort by), text (left aligned, sorted as a
   * string), show (cell text), cls}; detail(row): the element shown under
   * a row clicked; sortKey: the column first sorted by, largest first
   * ("+key": smallest first).
   */
  function Table(host, id, cols, rows, sortKey, detail) {
    var t = el('table'), thead = el('thead'), tbody = el('tbody'), hr = el('tr');
    var state = { key: sortKey.replace(/^\+/, ''), asc: sortKey[0] === '+' };
    t.id = id;
    cols.forEach(function (c) {
      var th = el('th', c.text ? 'text' : '', c.label);
      th.setAttribute('data-key', c.key);
      th.addEventListener('click', function () {
        state.asc = state.key === c.key ? !state.asc : !!c.text;
        state.key = c.key;
        draw();
      });
      hr.appendChild(th);
    });
    thead.appendChild(hr);
    t.appendChild(thead);
    t.appendChild(tbody);
    host.appendChild(t);
    /* long tables show their first rows until asked for all */
    var limit = rows.length > 30 ? 25 : rows.length, more = el('button', 'more');
    if (limit < rows.length) {
      more.textContent = 'Show all ' + rows.length + ' rows';
      more.addEventListener('click', function () { limit = rows.length; more.remove(); draw(); });
      host.appendChild(more);
    }
    function value(r, key) { return typeof key === 'function' ? key(r) : r[key]; }
    function draw() {
      var col = cols.filter(function (c) { return c.key === state.key; })[0];
      var sorted = rows.slice().sort(function (a, b) {
        var x = value(a, col.sortBy || col.key), y = value(b, col.sortBy || col.key);
        var d = col.text ? String(x).localeCompare(String(y)) : x - y;
        return state.asc ? d : -d;
      });
      [].forEach.call(hr.children, function (th) {
        th.className = (th.classList.contains('text') ? 'text ' : '') +
          (th.getAttribute('data-key') === state.key ? 'sorted' + (state.asc ? ' asc' : '') : '');
      });
      tbody.textContent = '';
      sorted.slice(0, limit).forEach(function (r, i) {
        var tr = el('tr', 'row');
        cols.forEach(function (c) {
          var td = el('td', (c.text ? 'text ' : '') + (c.cls || ''));
          var v = value(r, c.sortBy || c.key);
          if (c.bar) {
            var bar = el('span', 'bar');
            bar.style.width = Math.max(1, Math.round(60 * v / c.bar)) + 'px';
            td.appendChild(bar);
          }
          td.appendChild(document.createTextNode(c.show ? c.show(r, i) : v));
          if (!c.text) { td.setAttribute('data-v', v); td.title = count(v); } else td.title = td.textContent;
          tr.appendChild(td);
        });
        tbody.appendChild(tr);
        if (!detail) return;
        tr.addEventListener('click', function () {
          var next = tr.nextSibling;
          if (next && next.classList.contains('stack')) { next.remove(); return; }
          var dr = el('tr', 'stack'), td = el('td');
          td.colSpan = cols.length;
          td.appendChild(detail(r));
          dr.appendChild(td);
          tr.parentNode.insertBefore(dr, tr.nextSibling);
        });
      });
    }
    draw();
  }

  function stackOf(s) {
    var d = el('div', 'frames');
    if (!s.frames.length) d.textContent = '(no stack recorded)';
    s.frames.forEach(function (f) {
      var line = el('div');
      line.appendChild(document.createTextNode(f[0]));
      if (f[1]) line.appendChild(el('span', 'file', '  ' + f[1] + ':' + f[2]));
      line.appendChild(el('span', 'obj', '  [' + (f[3] || '?') + ']' + (f[4] ? ' (inlined)' : '')));
      d.appendChild(line);
    });
    if (s.nframes > s.frames.length) d.appendChild(el('div', 'obj', '... ' + (s.nframes - s.frames.length) + ' more frames'));
    d.appendChild(el('div', 'obj', 'stack ' + s.stack));
    return d;
  }

  function noStacks(host) {
    host.appendChild(el('p', 'note', 'This run was recorded without call stacks: memtrack track records them ' +
      'by default (not with --no-stacks), memtrack attach with --stacks.'));
  }

  function sites() {
    var host = body('sites');
    if (!D.stacks) return noStacks(host);
    host.appendChild(el('p', 'note', 'Each row is a distinct call stack (the function that called the allocator ' +
      'first); click a row for its stack, a column to sort.  The top ' + D.sites.length +
      ' sites of the rankings are listed.'));
    var max = 0;
    D.sites.forEach(function (s) { if (s.peak > max) max = s.peak; });
    Table(host, 'sites-table', [
      { label: 'Function', key: 'fn', text: true, sortBy: siteName, show: siteName, cls: 'fn' },
      { label: 'Location', key: 'loc', text: true, sortBy: function (s) { return where(siteFrame(s)); }, cls: 'loc' },
      { label: 'At the peak', key: 'peak', show: function (s) { return bytes(s.peak); }, bar: max || 1 },
      { label: 'Memory at its peak', key: 'memory', show: function (s) { return bytes(s.memory); } },
      { label: 'Allocations', key: 'allocs', show: function (s) { return count(s.allocs); } },
      { label: 'Temporary', key: 'temporary', show: function (s) { return count(s.temporary); } },
      { label: 'Allocated', key: 'allocated', show: function (s) { return bytes(s.allocated); } },
      { label: 'Leaked', key: 'leaked', show: function (s) { return bytes(s.leaked); } }
    ], D.sites, 'peak', stackOf);
  }

  /* a function's callers: the frame above it in its stacks, with their shares */
  function callersOf(f) {
    var d = el('div', 'frames');
    d.appendChild(el('div', 'obj', 'called from (' + f.ncallers + ' caller' + (f.ncallers === 1 ? '' : 's') +
      (f.ncallers > f.callers.length ? ', the ' + f.callers.length + ' heaviest' : '') + ', ' + f.nsites +
      ' call stack' + (f.nsites === 1 ? '' : 's') + '):'));
    var t = el('table', 'callers');
    f.callers.forEach(function (c) {
      var tr = el('tr');
      tr.appendChild(el('td', 'text fn', c.name));
      tr.appendChild(el('td', '', bytes(c.peak) + ' at the peak'));
      tr.appendChild(el('td', '', count(c.allocs) + ' allocations'));
      tr.appendChild(el('td', '', bytes(c.allocated) + ' allocated'));
      tr.appendChild(el('td', '', bytes(c.leaked) + ' leaked'));
      t.appendChild(tr);
    });
    d.appendChild(t);
    return d;
  }

  function functions() {
    var host = body('functions');
    if (!D.stacks) return noStacks(host);
    host.appendChild(el('p', 'note', 'Allocations merged by the function that called the allocator (its first ' +
      'frame outside malloc, operator new and their kin), across every stack; click a row for its callers.'));
    var max = 0;
    D.functions.forEach(function (f) { if (f.peak > max) max = f.peak; });
    Table(host, 'functions-table', [
      { label: 'Function', key: 'fn', text: true, sortBy: function (f) { return f.name; }, cls: 'fn' },
      { label: 'Location', key: 'loc', text: true, sortBy: fnWhere, cls: 'loc' },
      { label: 'At the peak', key: 'peak', show: function (f) { return bytes(f.peak); }, bar: max || 1 },
      { label: 'Memory at its peak', key: 'memory', show: function (f) { return bytes(f.memory); } },
      { label: 'Allocations', key: 'allocs', show: function (f) { return count(f.allocs); } },
      { label: 'Temporary', key: 'temporary', show: function (f) { return count(f.temporary); } },
      { label: 'Allocated', key: 'allocated', show: function (f) { return bytes(f.allocated); } },
      { label: 'Leaked', key: 'leaked', show: function (f) { return bytes(f.leaked); } },
      { label: 'Stacks', key: 'nsites' }
    ], D.functions, 'peak', callersOf);
  }

  function temporary() {
    var host = body('temporary');
    host.appendChild(el('p', 'note', count(D.temporary_count) + ' of ' + count(D.alloc_count) + ' allocations (' +
      pct(D.temporary_count, D.alloc_count) + ') were temporary: freed before their thread allocated anything ' +
      'else (heaptrack\u2019s test), ' + count(Math.round(D.duration_ns ? D.temporary_count / (D.duration_ns / 1e9) : 0)) +
      ' a second.  Each costs a malloc and a free for nothing kept.'));
    if (!D.stacks) return noStacks(host);
    var rows = D.functions.filter(function (f) { return f.temporary > 0; });
    if (!rows.length) { host.appendChild(el('p', 'note', 'No function made a temporary allocation.')); return; }
    Table(host, 'temporary-table', [
      { label: 'Function', key: 'fn', text: true, sortBy: function (f) { return f.name; }, cls: 'fn' },
      { label: 'Location', key: 'loc', text: true, sortBy: fnWhere, cls: 'loc' },
      { label: 'Temporary', key: 'temporary', show: function (f) { return count(f.temporary); } },
      { label: 'Allocations', key: 'allocs', show: function (f) { return count(f.allocs); } },
      { label: 'Share temporary', key: 'share', sortBy: function (f) { return f.allocs ? f.temporary / f.allocs : 0; },
        show: function (f) { return pct(f.temporary, f.allocs); } }
    ], rows, 'temporary', callersOf);
  }

  /* heaptrack -H's histogram: allocations by size, in powers of two */
  function sizes() {
    var host = body('sizes'), maxc = 0;
    if (!D.sizes.length) { host.appendChild(el('p', 'note', 'No allocation.')); return; }
    D.sizes.forEach(function (b) { if (b[2] > maxc) maxc = b[2]; });
    host.appendChild(el('p', 'note', 'Every allocation by the size it asked for, in powers of two.'));
    var rows = D.sizes.map(function (b) { return { lo: b[0], hi: b[1], n: b[2], bytes: b[3] }; });
    function range(r) { return r.lo === r.hi ? bytes(Number(r.lo)) : bytes(Number(r.lo)) + ' \u2013 <' + bytes(Number(r.hi) + 1); }
    Table(host, 'sizes-table', [
      { label: 'Size', key: 'size', text: true, sortBy: function (r) { return ('0000000000000000000' + r.lo).slice(-20); },
        show: range },
      { label: 'Allocations', key: 'n', show: function (r) { return count(r.n); }, bar: maxc },
      { label: 'Share', key: 'share', sortBy: function (r) { return r.n; }, show: function (r) { return pct(r.n, D.alloc_count); } },
      { label: 'Bytes requested', key: 'bytes', show: function (r) { return bytes(r.bytes); } }
    ], rows, '+size', null);
  }

  function leaks() {
    var host = body('leaks');
    host.appendChild(el('p', 'note', 'Never freed before their process exited or exec\u2019d: ' +
      count(D.leaked_count) + ' allocation' + (D.leaked_count === 1 ? '' : 's') + ', ' + bytes(D.leaked_bytes) +
      '; mapped memory still mapped: ' + bytes(D.leaked_mapped_bytes) + '.  Age: from the allocation to the exit.' +
      (D.attached ? '  Attached: the ' + count(D.live_end_procs) + ' processes alive when the recording stopped ' +
        'still held ' + bytes(D.live_end_bytes) + ' in ' + count(D.live_end_count) + ' blocks, not counted as leaks.' : '')));
    if (!D.stacks) return noStacks(host);
    var rows = D.sites.filter(function (s) { return s.leaked > 0; });
    if (!rows.length) { host.appendChild(el('p', 'note', 'No call site leaked.')); return; }
    Table(host, 'leaks-table', [
      { label: 'Function', key: 'fn', text: true, sortBy: siteName, show: siteName, cls: 'fn' },
      { label: 'Location', key: 'loc', text: true, sortBy: function (s) { return where(siteFrame(s)); }, cls: 'loc' },
      { label: 'Leaked', key: 'leaked', show: function (s) { return bytes(s.leaked); } },
      { label: 'Blocks', key: 'leaked_count', show: function (s) { return count(s.leaked_count); } },
      { label: 'Oldest', key: 'age_max_ns', show: function (s) { return age(s.age_max_ns); } },
      { label: 'Mean age', key: 'age_mean_ns', show: function (s) { return age(s.age_mean_ns); } }
    ], rows, 'leaked', stackOf);
  }

  function processes() {
    var host = body('processes'), key = D.rss ? 'peak_rss' : 'peak_heap';
    var cols = [
      { label: 'PID', key: 'pid' }, { label: 'Parent', key: 'ppid' },
      { label: 'Command', key: 'cmd', text: true, sortBy: function (p) { return p.command || '?'; }, cls: 'fn' },
      { label: 'Allocations', key: 'allocs', show: function (p) { return count(p.allocs); } },
      { label: 'Allocated', key: 'allocated', show: function (p) { return bytes(p.allocated); } },
      { label: 'Peak heap', key: 'peak_heap', show: function (p) { return bytes(p.peak_heap); } },
      { label: 'Peak mapped', key: 'peak_mapped', show: function (p) { return bytes(p.peak_mapped); } }
    ];
    if (D.rss) cols.push({ label: 'Peak RSS', key: 'peak_rss', show: function (p) { return bytes(p.peak_rss); } });
    cols.push({ label: 'Leaked', key: 'leaked', show: function (p) { return bytes(p.leaked); } });
    cols.push({ label: 'Exit', key: 'exit', text: true, sortBy: function (p) {
      return p.exit_code === undefined ? 'running' : p.exit_signal ? 'signal ' + p.exit_signal : String(p.exit_code);
    } });
    host.appendChild(el('p', 'note', count(D.processes.length) + ' process' + (D.processes.length === 1 ? '' : 'es') +
      ', sorted by ' + (D.rss ? 'peak RSS' : 'peak heap') + '; click a column to sort.'));
    Table(host, 'processes-table', cols, D.processes, key, null);
  }

  function details() {
    var dl = el('dl', 'kv'), host = body('details');
    function kv(k, v) { dl.appendChild(el('dt', '', k)); dl.appendChild(el('dd', '', v)); }
    kv('Command', D.command);
    kv('Kernel', D.kernel || 'unknown');
    kv('Duration', secs(D.duration_ns));
    kv('Frees', count(D.free_count) + (D.unknown_free_count ? ' (' + count(D.unknown_free_count) +
      ' of blocks not seen allocated)' : ''));
    kv('Peak mapped memory', bytes(D.peak_mapped_bytes));
    if (D.physical) kv('Peak physical memory', bytes(D.peak_physical_bytes));
    kv('Events lost', count(D.dropped));
    kv('Events', Object.keys(D.events).map(function (k) { return k + ' ' + count(D.events[k]); }).join(', '));
    D.marks.forEach(function (m) { kv('Mark ' + m.name, secs(m.ns) + ' (pid ' + m.pid + ')'); });
    host.appendChild(dl);
  }

  /* ---- the flame graph ---- */
  var FH = 17;
  function warm(name) {
    var h = 2166136261;
    for (var i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 16777619) >>> 0;
    return 'rgb(' + (205 + h % 51) + ',' + (80 + (h >>> 8) % 150) + ',' + ((h >>> 16) % 60) + ')';
  }

  function Flame(host) {
    var metrics = Object.keys(METRICS).filter(function (m) { return D.flame[m] && D.flame[m].nodes.length; });
    var st = { metric: metrics[0], icicle: true, zoom: 0, q: '' }, T = null;
    var bar = el('div', 'toolbar'), sel = el('select'), flip = el('button', '', 'Root at the bottom');
    var reset = el('button', '', 'Reset zoom'), q = el('input'), info = el('div'), matched = el('span', 'note');
    var svg = svgEl('svg', { id: 'flame-svg' }), tip = document.getElementById('ftip');
    sel.id = 'flame-metric';
    metrics.forEach(function (m) { var o = el('option', '', METRICS[m]); o.value = m; sel.appendChild(o); });
    q.placeholder = 'Search functions';
    q.id = 'flame-search';
    info.id = 'flame-info';
    matched.id = 'flame-matched';
    [sel, flip, reset, q, matched].forEach(function (e) { bar.appendChild(e); });
    var note = el('p', 'note');
    host.appendChild(note);
    host.appendChild(bar);
    host.appendChild(info);
    host.appendChild(svg);

    function load() {
      var src = D.flame[st.metric], n = src.nodes.length / 3, stack = [], next = [];
      T = { depth: [], name: [], value: [], x: [], parent: [] };
      for (var i = 0; i < n; i++) {
        var d = src.nodes[3 * i], v = src.nodes[3 * i + 2];
        stack.length = d;
        var p = d ? stack[d - 1] : -1;
        T.depth.push(d); T.name.push(src.names[src.nodes[3 * i + 1]]); T.value.push(v); T.parent.push(p);
        T.x.push(p < 0 ? 0 : next[p]);
        if (p >= 0) next[p] += v;
        next[i] = T.x[i];
        stack.push(i);
      }
      st.zoom = 0;
    }
    function isAncestor(a, i) { for (var p = T.parent[i]; p >= 0; p = T.parent[p]) if (p === a) return true; return false; }
    function draw() {
      var W = svg.clientWidth || host.clientWidth || 1200, z = st.zoom, zx = T.x[z], zw = T.value[z] || 1;
      var shown = [], levels = 1, re = st.q.toLowerCase();
      for (var i = 0; i < T.value.length; i++) {
        var anc = i === z || isAncestor(i, z), px, pw;
        if (anc) { px = 0; pw = W; } else {
          if (T.x[i] < zx || T.x[i] + T.value[i] > zx + zw || T.depth[i] <= T.depth[z]) continue;
          px = (T.x[i] - zx) / zw * W; pw = T.value[i] / zw * W;
          if (pw < 0.5) continue;
        }
        shown.push([i, px, pw, anc && i !== z]);
        if (T.depth[i] + 1 > levels) levels = T.depth[i] + 1;
      }
      svg.textContent = '';
      svg.setAttribute('height', levels * FH);
      svg.setAttribute('viewBox', '0 0 ' + W + ' ' + levels * FH);
      shown.forEach(function (s) {
        var i = s[0], y = st.icicle ? T.depth[i] * FH : (levels - 1 - T.depth[i]) * FH, name = T.name[i];
        var hit = re && i && name.toLowerCase().indexOf(re) >= 0;
        var g = svgEl('g', { 'class': 'fr', 'data-i': i, 'data-n': name, 'data-v': T.value[i] });
        g.appendChild(svgEl('rect', { x: s[1], y: y, width: Math.max(s[2] - 0.5, 0.5), height: FH - 1, rx: 2,
          fill: hit ? 'rgb(230,0,230)' : i ? warm(name) : '#c8c8c8', 'fill-opacity': s[3] ? 0.55 : 1 }));
        var fit = Math.floor((s[2] - 6) / 7);
        if (fit >= 3) {
          var t = svgEl('text', { x: s[1] + 3, y: y + 12 });
          t.textContent = name.length <= fit ? name : name.slice(0, fit - 2) + '..';
          g.appendChild(t);
        }
        svg.appendChild(g);
      });
      reset.disabled = !z;
      flip.textContent = st.icicle ? 'Root at the bottom' : 'Root at the top';
      note.textContent = (st.icicle ? 'Callers above their callees' : 'Callees above their callers') +
        '; a frame\u2019s width is its share of the metric.  Click a frame to zoom into it, hover for its value.';
      matched.textContent = re ? 'Matched: ' + pct(matchedValue(re), T.value[0]) : '';
    }
    /* the metric under frames that match, each path counted once */
    function matchedValue(re) {
      var sum = 0, inside = -1;
      for (var i = 1; i < T.value.length; i++) {
        if (inside >= 0 && T.depth[i] > inside) continue;
        inside = -1;
        if (T.name[i].toLowerCase().indexOf(re) >= 0) { sum += T.value[i]; inside = T.depth[i]; }
      }
      return sum;
    }
    function describe(i) {
      var v = T.value[i], m = st.metric;
      return T.name[i] + ': ' + (m === 'allocations' ? count(v) + ' allocations' : bytes(v)) + ' (' +
        pct(v, T.value[0]) + ' of ' + METRICS[m].toLowerCase() + ')';
    }
    function frameOf(e) { var g = e.target.closest && e.target.closest('g.fr'); return g ? +g.getAttribute('data-i') : -1; }
    svg.addEventListener('click', function (e) { var i = frameOf(e); if (i >= 0) { st.zoom = i; draw(); } });
    svg.addEventListener('mousemove', function (e) {
      var i = frameOf(e);
      if (i < 0) { tip.style.display = 'none'; return; }
      info.textContent = describe(i);
      tip.textContent = describe(i);
      tip.style.display = 'block';
      tip.style.left = (e.pageX + 14) + 'px';
      tip.style.top = (e.pageY + 14) + 'px';
    });
    svg.addEventListener('mouseleave', function () { tip.style.display = 'none'; });
    sel.addEventListener('change', function () { st.metric = sel.value; load(); draw(); });
    flip.addEventListener('click', function () { st.icicle = !st.icicle; draw(); });
    reset.addEventListener('click', function () { st.zoom = 0; draw(); });
    q.addEventListener('input', function () { st.q = q.value; draw(); });
    window.addEventListener('resize', draw);
    load();
    draw();
    info.textContent = describe(0);
    /* what tests and links drive: search, zoom by name, switch the metric */
    return {
      search: function (s) { q.value = s; st.q = s; draw(); },
      zoom: function (name) { var i = T.name.indexOf(name); if (i >= 0) { st.zoom = i; draw(); } },
      metric: function (m) { sel.value = m; st.metric = m; load(); draw(); },
      flip: function () { st.icicle = !st.icicle; draw(); }
    };
  }

  function flame() {
    var host = body('flame');
    if (!D.stacks) return noStacks(host);
    var any = Object.keys(D.flame).some(function (m) { return D.flame[m].nodes.length; });
    if (!any) { host.appendChild(el('p', 'note', 'No call site to draw.')); return; }
    window.mtFlame = Flame(host);
  }

  header();
  summary();
  functions();
  sites();
  flame();
  leaks();
  temporary();
  sizes();
  processes();
  details();
  /* page.html#SECTION: the section is laid out only now, so scroll to it again */
  var target = location.hash.length > 1 && document.getElementById(location.hash.slice(1));
  if (target && target.scrollIntoView) target.scrollIntoView();
})();
