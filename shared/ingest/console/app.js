// Baton console: tasks, a task's conversation and waterfall, schedules.
//
// Safety rules this file keeps (console.rs tests them):
// * every piece of data reaches the page as text (textContent, text nodes,
//   setAttribute): nothing is ever parsed as markup or code;
// * the API token lives in sessionStorage (this tab only) and travels only
//   in the Authorization header, never in a URL.
'use strict';

(() => {
  const TOKEN_KEY = 'baton.apiToken';
  // The API is served beside the console, which may sit under a prefix.
  const API_BASE = location.pathname.replace(/\/console\/?$/, '');
  const STATUSES = ['queued', 'running', 'waiting', 'succeeded', 'failed', 'cancelled'];
  const TERMINAL = ['succeeded', 'failed', 'cancelled'];
  const LIST_REFRESH_MS = 3000;
  const TASK_REFRESH_MS = 2000;
  const SCHEDULES_REFRESH_MS = 10000;
  const PAGE_SIZE = 50;
  const SEARCH_PAUSE_MS = 400;
  const SVG_NS = 'http://www.w3.org/2000/svg';

  const byId = (id) => document.getElementById(id);
  const enc = encodeURIComponent;

  // ------------------------------------------------------------ DOM helpers

  function append(parent, kids) {
    for (const k of kids.flat(Infinity)) {
      if (k == null || k === false) continue;
      // A string becomes a text node: it is never read as markup.
      parent.append(k instanceof Node ? k : String(k));
    }
    return parent;
  }

  function el(tag, props, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v == null || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    return append(e, kids);
  }

  function svg(tag, attrs, ...kids) {
    const e = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    return append(e, kids);
  }

  // Messages (errors, what a click did) go to the live region; the
  // refresh time does not, or a screen reader would announce every tick.
  function say(text, isError) {
    const s = byId('status');
    s.textContent = text || '';
    s.classList.toggle('error', !!isError);
  }

  function updated(text) {
    byId('updated').textContent = text;
  }

  // ------------------------------------------------------------ formatting

  function when(iso) {
    const d = new Date(iso);
    return Number.isNaN(d.getTime()) ? String(iso || '—') : d.toLocaleString();
  }

  function clock(d) {
    return d.toLocaleTimeString();
  }

  function duration(ms) {
    if (!Number.isFinite(ms) || ms < 0) return '—';
    if (ms < 1000) return Math.round(ms) + ' ms';
    if (ms < 60000) return (ms / 1000).toFixed(1) + ' s';
    const s = Math.round(ms / 1000);
    if (s < 3600) return Math.floor(s / 60) + ' min ' + (s % 60) + ' s';
    return Math.floor(s / 3600) + ' h ' + Math.floor((s % 3600) / 60) + ' min';
  }

  function cost(usd) {
    if (typeof usd !== 'number' || !(usd > 0)) return '—';
    return '$' + (usd < 0.01 ? usd.toFixed(4) : usd.toFixed(2));
  }

  function count(n) {
    return typeof n === 'number' ? n.toLocaleString() : '—';
  }

  function isTerminal(status) {
    return TERMINAL.includes(status);
  }

  // How long the task has run: until its last update once it ended.
  function taskDuration(t) {
    const start = Date.parse(t.created_at);
    const end = isTerminal(t.status) ? Date.parse(t.updated_at) : Date.now();
    return duration(end - start);
  }

  function shorten(text, max) {
    const s = String(text);
    return s.length > max ? s.slice(0, max - 1) + '…' : s;
  }

  function statusBadge(t) {
    const kind = t.waiting_for && t.waiting_for.kind;
    const label = t.status === 'waiting' && kind ? 'waiting · ' + kind : t.status;
    return el('span', { class: 'badge st-' + (STATUSES.includes(t.status) ? t.status : 'unknown') }, label);
  }

  // ------------------------------------------------------------ the API

  class HttpError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  async function api(method, path, body) {
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (!token) throw new HttpError(401, 'not signed in');
    const headers = { Authorization: 'Bearer ' + token, Accept: 'application/json' };
    const init = { method, headers, cache: 'no-store', credentials: 'omit', redirect: 'error' };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let r;
    try {
      r = await fetch(API_BASE + path, init);
    } catch (_) {
      throw new HttpError(0, 'The server cannot be reached.');
    }
    let data = null;
    try {
      data = await r.json();
    } catch (_) {
      // Not JSON: the status says enough.
    }
    if (!r.ok) {
      const message = data && typeof data.error === 'string' ? data.error : 'HTTP ' + r.status;
      throw new HttpError(r.status, message);
    }
    return data;
  }

  // A failed refresh: a refused token signs out and an unknown task stops
  // (false: stop refreshing); anything else is shown and retried.
  function failed(e) {
    if (e instanceof HttpError && e.status === 401) {
      signOut('The server refused the token: sign in again.');
      return false;
    }
    say(e instanceof HttpError ? e.message : String(e), true);
    return !(e instanceof HttpError && (e.status === 400 || e.status === 404));
  }

  // ------------------------------------------------------------ views and refresh

  // Each view gets a generation; a refresh of an older view stops itself.
  let generation = 0;
  let timer = 0;

  // Runs load() now and every `ms` while its view is shown; load returns
  // false to stop. Returns a function that refreshes at once.
  function every(ms, load) {
    const mine = generation;
    const current = () => mine === generation;
    let busy = false;
    const tick = async () => {
      if (!current() || busy) return;
      clearTimeout(timer);
      busy = true;
      let again = true;
      try {
        // A hidden tab does not poll; it catches up when shown again.
        if (!document.hidden) {
          again = (await load(current)) !== false;
          // A refresh that worked clears the last one's error.
          if (current() && byId('status').classList.contains('error')) say('');
        }
      } catch (e) {
        again = failed(e);
      } finally {
        busy = false;
      }
      if (again && current()) timer = setTimeout(tick, ms);
    };
    tick();
    return tick;
  }

  function splitHash() {
    const h = location.hash.replace(/^#/, '') || '/tasks';
    const i = h.indexOf('?');
    return i < 0 ? [h, ''] : [h.slice(0, i), h.slice(i + 1)];
  }

  function route() {
    generation += 1;
    clearTimeout(timer);
    const signedIn = !!sessionStorage.getItem(TOKEN_KEY);
    byId('signin').hidden = signedIn;
    byId('nav').hidden = !signedIn;
    const view = byId('view');
    view.replaceChildren();
    say('');
    updated('');
    if (!signedIn) {
      byId('token').focus();
      return;
    }
    const [path, query] = splitHash();
    const m = /^\/tasks\/([^/]+)$/.exec(path);
    let section = 'tasks';
    if (m) taskPage(view, decodeURIComponent(m[1]));
    else if (path === '/schedules') {
      section = 'schedules';
      schedulesPage(view);
    } else tasksPage(view, new URLSearchParams(query));
    for (const a of document.querySelectorAll('[data-nav]')) {
      if (a.dataset.nav === section) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
    const heading = view.querySelector('h1');
    if (heading) heading.focus();
  }

  // ------------------------------------------------------------ sign-in

  async function signIn(ev) {
    ev.preventDefault();
    const input = byId('token');
    const error = byId('signin-error');
    const token = input.value.trim();
    error.textContent = '';
    if (!token) {
      error.textContent = 'Enter the API token.';
      return;
    }
    sessionStorage.setItem(TOKEN_KEY, token);
    try {
      await api('GET', '/tasks?limit=1');
    } catch (e) {
      if (e.status === 401 || e.status === 0) {
        sessionStorage.removeItem(TOKEN_KEY);
        error.textContent = e.status === 401 ? 'The server refused that token.' : e.message;
        return;
      }
      // Anything else (a busy backend) does not say the token is wrong.
    }
    input.value = '';
    route();
  }

  function signOut(message) {
    sessionStorage.removeItem(TOKEN_KEY);
    route();
    byId('signin-error').textContent = message || '';
  }

  // ------------------------------------------------------------ task list

  function tasksPage(view, params) {
    const status = STATUSES.includes(params.get('status')) ? params.get('status') : '';
    const agent = (params.get('agent') || '').trim().slice(0, 200);
    const search = (params.get('q') || '').trim().slice(0, 200);
    const thread = (params.get('thread') || '').slice(0, 300);
    const statusField = el('select', { id: 'f-status', name: 'status' },
      el('option', { value: '' }, 'any'),
      STATUSES.map((s) => el('option', { value: s, selected: s === status }, s)));
    const agentField = el('input', {
      id: 'f-agent', name: 'agent', type: 'text', value: agent, placeholder: 'any', autocomplete: 'off',
    });
    const searchField = el('input', {
      id: 'f-q', name: 'q', type: 'search', value: search, placeholder: 'text of the request', autocomplete: 'off',
      maxlength: '200',
    });
    const apply = () => {
      const q = new URLSearchParams();
      if (statusField.value) q.set('status', statusField.value);
      if (agentField.value.trim()) q.set('agent', agentField.value.trim());
      if (searchField.value.trim()) q.set('q', searchField.value.trim());
      if (thread) q.set('thread', thread);
      const s = q.toString();
      location.hash = '#/tasks' + (s ? '?' + s : '');
    };
    statusField.addEventListener('change', apply);
    // Searched on the server as one types, once typing pauses: at most one
    // request per pause, never per keystroke.
    let typing = null;
    searchField.addEventListener('input', () => {
      clearTimeout(typing);
      typing = setTimeout(() => {
        if (searchField.value.trim() !== search) apply();
      }, SEARCH_PAUSE_MS);
    });
    const filters = el('form', { class: 'filters', role: 'search', onsubmit: (e) => { e.preventDefault(); apply(); } },
      el('label', { for: 'f-status' }, 'Status'), statusField,
      el('label', { for: 'f-agent' }, 'Agent'), agentField,
      el('label', { for: 'f-q' }, 'Search'), searchField,
      el('button', { type: 'submit' }, 'Filter'));
    const scope = thread
      ? el('p', { class: 'scope', id: 'thread-scope' }, 'Tasks of one conversation: ', el('code', null, thread), ' — ',
        el('a', { href: '#/tasks' }, 'all tasks'))
      : null;
    const rowsBody = el('tbody');
    const table = el('table', { id: 'tasks-table', class: 'grid' },
      el('caption', { class: 'sr-only' }, 'Tasks, newest first'),
      el('thead', null, el('tr', null,
        ['Task', 'Asked', 'From', 'Where', 'Agent', 'Status', 'Created', 'Duration', 'Cost', 'Steps']
          .map((h) => el('th', { scope: 'col' }, h)))),
      rowsBody);
    const empty = el('p', { class: 'empty', hidden: true }, 'No tasks match.');
    const more = el('button', { type: 'button', class: 'more', hidden: true }, 'Load more');
    view.append(el('h1', { tabindex: '-1' }, 'Tasks'), filters);
    if (scope) view.append(scope);
    view.append(el('div', { class: 'scroll' }, table), empty, more);

    let first = [];
    let rest = [];
    let cursor = null;
    const rows = new Map();
    const listPath = (after) => {
      const q = new URLSearchParams({ limit: String(PAGE_SIZE) });
      if (status) q.set('status', status);
      if (agent) q.set('agent', agent);
      if (search) q.set('q', search);
      if (thread) q.set('thread', thread);
      if (after) q.set('cursor', after);
      return '/tasks?' + q;
    };

    const render = () => {
      const seen = new Set();
      const order = [];
      for (const t of first.concat(rest)) {
        if (!t || typeof t.task_id !== 'string' || seen.has(t.task_id)) continue;
        seen.add(t.task_id);
        let row = rows.get(t.task_id);
        if (!row) {
          row = taskRow(t.task_id);
          rows.set(t.task_id, row);
        }
        row.fill(t);
        order.push(row.tr);
      }
      // Rows are updated in place and moved only when the order changed,
      // so a refresh does not take the focus away.
      const same = order.length === rowsBody.children.length
        && order.every((tr, i) => rowsBody.children[i] === tr);
      if (!same) rowsBody.replaceChildren(...order);
      empty.hidden = order.length > 0;
      more.hidden = !cursor;
    };

    more.addEventListener('click', async () => {
      more.disabled = true;
      try {
        const page = await api('GET', listPath(cursor));
        rest = rest.concat(page.tasks || []);
        cursor = page.next_cursor || null;
        render();
      } catch (e) {
        failed(e);
      } finally {
        more.disabled = false;
      }
    });

    every(LIST_REFRESH_MS, async (current) => {
      const page = await api('GET', listPath(null));
      if (!current()) return false;
      first = page.tasks || [];
      // Once more pages are loaded, the cursor is the last page's.
      if (!rest.length) cursor = page.next_cursor || null;
      render();
      updated('Updated ' + clock(new Date()) + '; refreshing every ' + LIST_REFRESH_MS / 1000 + ' s.');
      return true;
    });
  }

  function taskRow(id) {
    const cells = {};
    const cell = (name, cls) => (cells[name] = el('td', { class: cls }));
    const tr = el('tr', { 'data-task-id': id },
      el('td', { class: 'id' }, el('a', { href: '#/tasks/' + enc(id) }, id)),
      cell('asked', 'asked'), cell('from'), cell('where'),
      cell('agent'), cell('status'), cell('created'), cell('duration', 'num'), cell('cost', 'num'), cell('steps', 'num'));
    const text = (name, value) => {
      if (cells[name].textContent !== value) cells[name].textContent = value;
    };
    let whereKey = null;
    const fill = (t) => {
      text('asked', typeof t.summary === 'string' && t.summary ? t.summary : '—');
      text('from', requesterLabel(t.requester));
      const key = JSON.stringify([t.thread, t.requester]);
      if (key !== whereKey) {
        whereKey = key;
        cells.where.replaceChildren(whereLink(t));
      }
      text('agent', typeof t.agent === 'string' ? t.agent : '—');
      const badge = statusBadge(t);
      if (cells.status.textContent !== badge.textContent) cells.status.replaceChildren(badge);
      text('created', when(t.created_at));
      text('duration', taskDuration(t));
      text('cost', cost(t.cost_usd));
      text('steps', count(t.steps));
      tr.dataset.status = String(t.status);
    };
    return { tr, fill };
  }

  // Who asked for a task: the Slack user (their display name when Slack
  // gave one, else their id), "HTTP", "schedule", or the parent of a
  // delegated task.
  function requesterLabel(r) {
    if (!r || typeof r !== 'object') return '—';
    switch (r.kind) {
      case 'slack':
        if (typeof r.name === 'string' && r.name) return r.name;
        return typeof r.user === 'string' ? '@' + r.user : 'Slack';
      case 'schedule': return 'schedule';
      case 'delegate': return 'task ' + String(r.parent_task_id || '').slice(0, 8) + '…';
      case 'http': return 'HTTP';
      default: return '—';
    }
  }

  // Where a task was asked: the Slack channel (or DM), or the HTTP
  // thread; linked to the tasks of that conversation when it has one.
  function whereLabel(t) {
    const r = t.requester || {};
    if (r.kind === 'slack') return r.direct_message ? 'DM ' + String(r.channel || '') : '#' + String(r.channel || '');
    if (typeof t.thread === 'string' && t.thread) return 'thread ' + t.thread;
    return '—';
  }

  function whereLink(t) {
    const label = whereLabel(t);
    if (typeof t.thread !== 'string' || !t.thread) return document.createTextNode(label);
    return el('a', { href: '#/tasks?thread=' + enc(t.thread), title: 'Tasks of this conversation' }, label);
  }

  // ------------------------------------------------------------ one task

  function taskPage(view, id) {
    const summary = el('dl', { class: 'summary', id: 'summary' });
    const siblings = el('ul', { class: 'plain', id: 'conversation-tasks' });
    let siblingsKey = null;
    const actions = el('div', { class: 'actions', id: 'actions' });
    const conversation = el('ol', { class: 'conversation', id: 'conversation' });
    const waterfall = el('div', { class: 'waterfall', id: 'waterfall' });
    view.append(
      el('p', { class: 'back' }, el('a', { href: '#/tasks' }, '← All tasks')),
      el('h1', { tabindex: '-1' }, 'Task ', el('code', null, id)),
      actions,
      summary,
      el('section', { 'aria-labelledby': 'conversation-tasks-title', id: 'conversation-tasks-section', hidden: true },
        el('h2', { id: 'conversation-tasks-title' }, 'Tasks of this conversation'), siblings),
      el('section', { 'aria-labelledby': 'conversation-title' },
        el('h2', { id: 'conversation-title' }, 'Conversation'), conversation),
      el('section', { 'aria-labelledby': 'waterfall-title' },
        el('h2', { id: 'waterfall-title' }, 'Waterfall'), waterfall));

    const path = '/tasks/' + enc(id);
    conversation.addEventListener('click', (ev) => {
      const button = ev.target instanceof Element ? ev.target.closest('button.fork') : null;
      if (button) openFork(button, id);
    });
    const writing = streamedAnswers(conversation);
    let after = null;
    let actionsKey = '';
    let spansKey = '';
    let looksAfterEnd = 0;
    // Each event once, in order, whichever of the stream and the polling
    // brought it.
    const show = (e) => {
      if (!e || typeof e.seq !== 'number' || (after != null && e.seq <= after)) return;
      after = e.seq;
      // A streamed answer shows as one entry that grows while it is
      // written, and gives way to the answer once it is committed.
      if (e.type === 'answer_delta') writing.delta(e);
      else {
        if (e.type === 'assistant_message') writing.done(e.step);
        conversation.append(eventItem(e));
      }
    };
    // Events come by the live stream while it works; the refresh below
    // still reads the summary, actions and waterfall, and reads the
    // events itself only while the stream is down.
    const live = { on: false };
    const myGeneration = generation;
    const refresh = every(TASK_REFRESH_MS, async (current) => {
      const task = await api('GET', path);
      while (!live.on) {
        const page = await api('GET', path + '/events' + (after == null ? '' : '?after=' + after));
        if (!current()) return false;
        const events = (page && page.events) || [];
        for (const e of events) show(e);
        if (events.length < 500) break;
      }
      const trace = await api('GET', path + '/trace');
      if (!current()) return false;
      renderSummary(summary, task);
      if (typeof task.thread === 'string' && task.thread) {
        const others = await api('GET', '/tasks?' + new URLSearchParams({ thread: task.thread, limit: '20' }));
        if (!current()) return false;
        const list = ((others && others.tasks) || []).filter((o) => o && typeof o.task_id === 'string');
        const k = JSON.stringify(list.map((o) => [o.task_id, o.status]));
        if (k !== siblingsKey) {
          siblingsKey = k;
          siblings.replaceChildren(...list.map((o) => el('li', null,
            o.task_id === id ? el('strong', null, o.task_id + ' (this task)') : el('a', { href: '#/tasks/' + enc(o.task_id) }, o.task_id),
            ' — ', String(o.status), ' — ', typeof o.summary === 'string' ? o.summary : '')));
          byId('conversation-tasks-section').hidden = list.length === 0;
        }
      }
      // Buttons are rebuilt only when what they act on changed, so a click
      // never lands on a button that was just replaced.
      const key = JSON.stringify([task.status, task.waiting_for]);
      if (key !== actionsKey) {
        actionsKey = key;
        renderActions(actions, task, id, () => refresh());
      }
      const spans = (trace && trace.spans) || [];
      const sKey = JSON.stringify(spans);
      if (sKey !== spansKey) {
        spansKey = sKey;
        renderWaterfall(waterfall, spans);
      }
      if (!isTerminal(task.status)) {
        updated('Updated ' + clock(new Date()) + '; refreshing while the task runs.');
        return true;
      }
      // The last segment's spans are written just after the task ends:
      // look a few more times, then stop.
      looksAfterEnd += 1;
      const complete = spans.some((s) => s.name === 'task' && !(s.attributes && s.attributes.in_progress));
      const again = looksAfterEnd < 5 && !(complete && looksAfterEnd > 1);
      updated('The task ' + task.status + '. Updated ' + clock(new Date()) + '.');
      return again;
    });
    followStream(path, () => after, show, live, () => myGeneration === generation, () => refresh());
  }

  // The task's live event stream (GET /tasks/{id}/stream, Server-Sent
  // Events) read with fetch, since EventSource cannot send the token.
  // Each event goes to show(); a stream the server closed (its time limit)
  // is reopened after the last event seen (Last-Event-ID). While it works
  // live.on is true; when it cannot be had (an older server, a proxy that
  // buffers, a failure) it is false and the page polls the events instead.
  async function followStream(path, lastSeq, show, live, current, refresh) {
    if (typeof ReadableStream === 'undefined' || typeof TextDecoder === 'undefined') return;
    let failures = 0;
    while (current() && failures < 3) {
      const token = sessionStorage.getItem(TOKEN_KEY);
      if (!token) return;
      const headers = { Authorization: 'Bearer ' + token, Accept: 'text/event-stream' };
      if (lastSeq() != null) headers['Last-Event-ID'] = String(lastSeq());
      let r;
      try {
        r = await fetch(API_BASE + path + '/stream', { headers, cache: 'no-store', credentials: 'omit', redirect: 'error' });
      } catch (_) {
        r = null;
      }
      if (!r || !r.ok || !r.body) {
        live.on = false;
        failures += 1;
        await new Promise((done) => setTimeout(done, 1000 * failures));
        continue;
      }
      failures = 0;
      live.on = true;
      const ended = await readEvents(r.body, current, (name, data) => {
        let value = null;
        try {
          value = JSON.parse(data);
        } catch (_) {
          return;
        }
        if (name === 'end') return;
        show(value);
        // A status change also changes the summary and the actions.
        if (name === 'status') refresh();
      });
      if (ended) {
        live.on = false;
        refresh();
        return;
      }
    }
    live.on = false;
  }

  // Reads Server-Sent Events from a fetch body and calls onEvent(name,
  // data) for each; true once an `end` event came.
  async function readEvents(body, current, onEvent) {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    let name = 'message';
    let data = [];
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return false;
        if (!current()) {
          reader.cancel();
          return false;
        }
        buffer += decoder.decode(value, { stream: true });
        let nl;
        while ((nl = buffer.indexOf('\n')) >= 0) {
          const line = buffer.slice(0, nl).replace(/\r$/, '');
          buffer = buffer.slice(nl + 1);
          if (line === '') {
            if (data.length) {
              const ended = name === 'end';
              onEvent(name, data.join('\n'));
              if (ended) {
                reader.cancel();
                return true;
              }
            }
            name = 'message';
            data = [];
          } else if (line.startsWith('event:')) {
            name = line.slice(6).trim();
          } else if (line.startsWith('data:')) {
            data.push(line.slice(5).replace(/^ /, ''));
          }
          // id:, retry: and comments need nothing: show() keeps the last
          // seq and the heartbeat only keeps the connection open.
        }
      }
    } catch (_) {
      return false;
    }
  }

  function renderSummary(dl, t) {
    const rows = [
      ['Status', statusBadge(t)],
      ['Asked', typeof t.summary === 'string' && t.summary ? t.summary : '—'],
      ['From', requesterLabel(t.requester)],
      ['Where', whereLink(t)],
      ['Agent', typeof t.agent === 'string' ? t.agent : '—'],
      ['Created', when(t.created_at)],
      ['Updated', when(t.updated_at)],
      ['Duration', taskDuration(t)],
      ['Steps', count(t.steps)],
      ['Segments', count(t.segments)],
      ['Tokens', t.usage ? count(t.usage.input_tokens) + ' in, ' + count(t.usage.output_tokens) + ' out' : '—'],
      ['Cost', cost(t.cost_usd)],
    ];
    if (t.parent_task_id) {
      rows.push(['Parent', el('a', { href: '#/tasks/' + enc(t.parent_task_id) }, t.parent_task_id)]);
    }
    if (Array.isArray(t.children) && t.children.length) {
      rows.push(['Children', el('ul', { class: 'plain' }, t.children.map((c) => el('li', null,
        el('a', { href: '#/tasks/' + enc(c.task_id) }, c.task_id), ' ', String(c.agent || ''), ' — ', c.status || 'running')))]);
    }
    if (typeof t.model === 'string' && t.model) rows.push(['Model', el('code', null, t.model)]);
    if (t.forked_from && typeof t.forked_from.task_id === 'string') {
      rows.push(['Forked from', el('span', { id: 'forked-from' },
        el('a', { href: '#/tasks/' + enc(t.forked_from.task_id) }, t.forked_from.task_id), ' at step ' + count(t.forked_from.step))]);
    }
    if (t.tools === 'recorded') rows.push(['Tools', 'recorded: answered from the source task, none run']);
    if (Array.isArray(t.forks) && t.forks.length) {
      rows.push(['Forks', el('ul', { class: 'plain', id: 'forks' }, t.forks.map((f) => el('li', null,
        el('a', { href: '#/tasks/' + enc(f) }, String(f)))))]);
    }
    if (t.error) rows.push(['Error', el('div', { class: 'text error' }, t.error)]);
    if (t.result != null) rows.push(['Result', el('div', { class: 'text', id: 'result' }, t.result)]);
    dl.replaceChildren(...rows.flatMap(([k, v]) => [el('dt', null, k), el('dd', null, v)]));
  }

  function renderActions(box, t, id, refresh) {
    box.replaceChildren();
    const w = t.waiting_for;
    if (t.status === 'waiting' && w) {
      const section = el('section', { class: 'waiting', id: 'waiting', 'aria-labelledby': 'waiting-title' });
      if (w.kind === 'approval') {
        const approve = el('button', { type: 'button', id: 'approve', class: 'approve' }, 'Approve');
        const deny = el('button', { type: 'button', id: 'deny', class: 'deny' }, 'Deny');
        const decide = async (yes) => {
          approve.disabled = true;
          deny.disabled = true;
          try {
            await api('POST', '/tasks/' + enc(id) + '/approvals/' + enc(w.approval_id), { approve: yes });
            say(yes ? 'Approved: the task goes on.' : 'Denied: the call will not be made.');
          } catch (e) {
            failed(e);
            approve.disabled = false;
            deny.disabled = false;
          }
          refresh();
        };
        approve.addEventListener('click', () => decide(true));
        deny.addEventListener('click', () => decide(false));
        append(section, [
          el('h2', { id: 'waiting-title' }, 'Waiting for approval'),
          el('p', null, 'The agent wants to call ', el('code', null, String(w.tool || '?')), ':'),
          el('div', { class: 'text', id: 'approval-summary' }, String(w.summary || '')),
          el('div', { class: 'buttons' }, approve, deny),
        ]);
      } else {
        append(section, [el('h2', { id: 'waiting-title' }, 'Waiting'), el('p', null, waitingText(w))]);
      }
      box.append(section);
    }
    if (!isTerminal(t.status)) {
      const cancel = el('button', { type: 'button', id: 'cancel', class: 'cancel' }, 'Cancel task');
      cancel.addEventListener('click', async () => {
        if (!window.confirm('Cancel this task? It stops at its next step.')) return;
        cancel.disabled = true;
        try {
          await api('POST', '/tasks/' + enc(id) + '/cancel', {});
          say('Cancel requested.');
        } catch (e) {
          failed(e);
          cancel.disabled = false;
        }
        refresh();
      });
      box.append(el('div', { class: 'buttons' }, cancel));
    }
  }

  // The Fork action of a step: asks for the model (optional) and whether
  // tools are answered from this task's records (the default: nothing runs
  // twice) or run live, then opens the new task.
  function openFork(button, id) {
    const step = Number(button.dataset.step);
    const old = byId('fork-panel');
    if (old) old.remove();
    const model = el('input', { type: 'text', id: 'fork-model', placeholder: "the agent's", autocomplete: 'off' });
    const tools = el('select', { id: 'fork-tools' },
      el('option', { value: 'recorded' }, 'recorded: answered from this task, none run'),
      el('option', { value: 'live' }, 'live: the tools run again'));
    const go = el('button', { type: 'button', id: 'fork-go', class: 'approve' }, 'Fork');
    const close = el('button', { type: 'button', id: 'fork-close' }, 'Close');
    const panel = el('div', { class: 'fork-panel', id: 'fork-panel', 'data-step': String(step) },
      el('p', null, 'A new task with this conversation through step ' + step + ', going on from there.'),
      el('label', null, 'Model ', model),
      el('label', null, 'Tools ', tools),
      el('div', { class: 'buttons' }, go, close));
    close.addEventListener('click', () => panel.remove());
    go.addEventListener('click', async () => {
      const body = { from_step: step, tools: tools.value };
      if (model.value.trim()) body.model = model.value.trim();
      go.disabled = true;
      try {
        const r = await api('POST', '/tasks/' + enc(id) + '/fork', body);
        say('Forked from step ' + step + ': task ' + r.task_id + '.');
        location.hash = '#/tasks/' + enc(r.task_id);
      } catch (e) {
        failed(e);
        go.disabled = false;
      }
    });
    button.closest('li').append(panel);
    model.focus();
  }

  function waitingText(w) {
    switch (w.kind) {
      case 'children': return 'for ' + count(w.pending) + ' child task(s) to finish.';
      case 'timer': return 'until ' + when(w.until) + '.';
      case 'reply': return 'for an answer to: ' + String(w.question || '') + ' (until ' + when(w.expires_at) + ')';
      // The URL is a capability: shown, as text, to the console's user only.
      case 'callback': return 'for a call of its one-time URL ' + String(w.url || '') + ' (until ' + when(w.expires_at) + ')';
      // Not the URL: the Connect link is the task's person's alone.
      case 'connection': return 'for its person to connect ' + String(w.provider || '') + ' (until ' + when(w.expires_at) + ')';
      // A kind a newer server sends is still named.
      default: return 'for ' + String(w.kind) + '.';
    }
  }

  // ------------------------------------------------------------ conversation

  // The answers being written, one entry per step (`answer_delta` events
  // concatenated; a restart starts the step's text over).
  function streamedAnswers(list) {
    const steps = new Map();
    return {
      delta(e) {
        let item = steps.get(e.step);
        if (!item) {
          const text = el('div', { class: 'text' }, '');
          item = { text, li: el('li', { class: 'entry assistant writing', 'data-type': 'answer_delta', 'data-seq': String(e.seq) },
            el('div', { class: 'head' }, el('span', { class: 'who' }, 'assistant · writing…'), ' ',
              el('time', { datetime: String(e.at || '') }, when(e.at))), text) };
          steps.set(e.step, item);
          list.append(item.li);
        }
        if (e.restart) item.text.textContent = '';
        item.text.textContent += String(e.text || '');
      },
      done(step) {
        const item = steps.get(step);
        if (item) {
          item.li.remove();
          steps.delete(step);
        }
      },
    };
  }

  // Who wrote a user message, from the author recorded with it (never
  // from its text): the requester (a task takes messages only from the
  // person it acts for), a schedule, or the parent task's brief.
  function userAuthor(from) {
    if (from && typeof from === 'object') {
      if (from.schedule) return 'schedule';
      if (from.parent) return 'parent task';
    }
    return 'requester';
  }

  function eventItem(e) {
    let who = String(e.type);
    let kind = 'system';
    const body = [];
    switch (e.type) {
      case 'user_message': {
        who = userAuthor(e.from);
        kind = 'user';
        body.push(el('div', { class: 'text' }, String(e.text || '')));
        break;
      }
      case 'assistant_message': {
        who = 'assistant' + (e.model ? ' · ' + e.model : '');
        kind = 'assistant';
        if (e.text) body.push(el('div', { class: 'text' }, e.text));
        for (const c of e.tool_calls || []) {
          body.push(el('div', { class: 'call' }, 'calls ', el('code', null, String(c.name)),
            el('pre', null, JSON.stringify(c.arguments, null, 2))));
        }
        if (e.usage) {
          body.push(el('p', { class: 'meta' }, 'step ' + e.step + ' · ' + count(e.usage.input_tokens) + ' in, '
            + count(e.usage.output_tokens) + ' out tokens'));
        }
        if (Number.isInteger(e.step)) {
          body.push(el('div', { class: 'buttons' }, el('button', { type: 'button', class: 'small fork', 'data-step': String(e.step),
            title: 'A new task with this conversation through step ' + e.step + ', going on from there' }, 'Fork from step ' + e.step)));
        }
        break;
      }
      case 'tool_started':
        who = 'tool ' + e.name;
        kind = 'tool';
        body.push(el('p', { class: 'meta' }, 'started (not idempotent: it will not run twice)'));
        break;
      case 'tool_result':
        who = 'tool ' + e.name + (e.is_error ? ' · error' : '');
        kind = e.is_error ? 'tool failed' : 'tool';
        body.push(el('div', { class: 'text' }, String(e.content || '')));
        if (e.truncated_chars) body.push(el('p', { class: 'meta' }, count(e.truncated_chars) + ' characters cut'));
        break;
      case 'status':
        who = 'baton';
        body.push(el('p', { class: 'meta' }, String(e.status) + (e.detail ? ' — ' + e.detail : '')));
        break;
      case 'note':
        who = 'runtime note · ' + e.reason;
        body.push(el('div', { class: 'text' }, String(e.text || '')));
        break;
      case 'recap': {
        const turns = e.turns || [];
        who = 'earlier in this conversation · ' + count(turns.length) + ' turn(s)';
        if (e.summary) body.push(el('div', { class: 'text' }, 'In short: ' + String(e.summary)));
        for (const t of turns) {
          const by = t.speaker === 'agent' ? 'assistant' : (t.author ? '<@' + t.author + '>' : 'user');
          body.push(el('div', { class: 'text' }, by + ': ' + String(t.text || '')));
        }
        break;
      }
      case 'summary':
        who = 'summary of the conversation so far';
        body.push(el('div', { class: 'text' }, String(e.text || '')));
        break;
      case 'attachment':
        who = 'file';
        kind = 'user';
        body.push(el('p', null, el('code', null, String(e.name)), ' (' + e.media_type + ', ' + count(e.bytes) + ' bytes)'
          + (e.note ? ' — ' + e.note : '')));
        break;
      default:
        body.push(el('p', { class: 'meta' }, 'a ' + String(e.type) + ' entry'));
    }
    return el('li', { class: 'entry ' + kind, 'data-type': String(e.type), 'data-seq': String(e.seq) },
      el('div', { class: 'head' }, el('span', { class: 'who' }, who), ' ',
        el('time', { datetime: String(e.at || '') }, when(e.at))),
      body);
  }

  // ------------------------------------------------------------ waterfall

  const SPAN_KINDS = { task: 'task', segment: 'segment', llm_call: 'llm', tool_call: 'tool', compaction: 'compaction' };

  function spanLabel(s) {
    const a = s.attributes || {};
    const parts = [];
    switch (s.name) {
      case 'task': parts.push('task', a.status || ''); break;
      case 'segment': parts.push('segment ' + (a.segment != null ? a.segment : '')); break;
      case 'llm_call':
        // The agent's judgment (route, plan, supervise, verdict) says what for.
        if (a['call.purpose']) parts.push(String(a['call.purpose']));
        parts.push(String(a.model || 'model call'));
        if (a.input_tokens != null) parts.push(count(a.input_tokens) + '→' + count(a.output_tokens) + ' tok');
        if (a.cost_usd > 0) parts.push(cost(a.cost_usd));
        break;
      case 'tool_call': parts.push('tool ' + (a.tool || '?')); break;
      default: parts.push(String(s.name));
    }
    if (a.error === true) parts.push('error');
    parts.push(duration(s.end_ms - s.start_ms));
    return parts.filter(Boolean).join(' · ');
  }

  function spanDetails(s) {
    const lines = [s.name + ': ' + duration(s.end_ms - s.start_ms)];
    for (const [k, v] of Object.entries(s.attributes || {})) {
      lines.push(k + ': ' + (typeof v === 'string' ? v : JSON.stringify(v)));
    }
    return lines.join('\n');
  }

  // Spans in tree order (children under their parent, by start time), with depth.
  function spanRows(spans) {
    const ids = new Set(spans.map((s) => s.span_id));
    const children = new Map();
    const roots = [];
    for (const s of spans) {
      if (s.parent_id && ids.has(s.parent_id) && s.parent_id !== s.span_id) {
        if (!children.has(s.parent_id)) children.set(s.parent_id, []);
        children.get(s.parent_id).push(s);
      } else roots.push(s);
    }
    const byStart = (a, b) => a.start_ms - b.start_ms || a.end_ms - b.end_ms;
    const rows = [];
    const seen = new Set();
    const walk = (s, depth) => {
      if (seen.has(s.span_id)) return;
      seen.add(s.span_id);
      rows.push({ s, depth });
      for (const c of (children.get(s.span_id) || []).sort(byStart)) walk(c, depth + 1);
    };
    for (const r of roots.sort(byStart)) walk(r, 0);
    return rows;
  }

  function renderWaterfall(box, spans) {
    const valid = spans.filter((s) => s && Number.isFinite(s.start_ms) && Number.isFinite(s.end_ms));
    if (!valid.length) {
      box.replaceChildren(el('p', { class: 'empty' }, 'No spans yet.'));
      return;
    }
    const rows = spanRows(valid);
    let t0 = Infinity;
    let t1 = -Infinity;
    for (const s of valid) {
      t0 = Math.min(t0, s.start_ms);
      t1 = Math.max(t1, s.end_ms);
    }
    const span = Math.max(t1 - t0, 1);
    const W = 1000;
    const LABEL = 360;
    const RIGHT = 12;
    const ROW = 22;
    const TOP = 22;
    const plot = W - LABEL - RIGHT;
    const x = (ms) => LABEL + ((ms - t0) / span) * plot;
    const height = TOP + rows.length * ROW + 6;
    const chart = svg('svg', {
      viewBox: '0 0 ' + W + ' ' + height, class: 'wf', role: 'img', 'aria-labelledby': 'wf-svg-title',
      preserveAspectRatio: 'xMinYMin meet',
    }, svg('title', { id: 'wf-svg-title' }, rows.length + ' spans over ' + duration(span)));
    for (let i = 0; i <= 4; i += 1) {
      const tx = LABEL + (plot * i) / 4;
      chart.append(
        svg('line', { x1: tx, x2: tx, y1: TOP - 6, y2: height, class: 'tick' }),
        svg('text', { x: tx, y: 12, class: 'axis', 'text-anchor': i === 0 ? 'start' : i === 4 ? 'end' : 'middle' },
          duration((span * i) / 4)));
    }
    rows.forEach(({ s, depth }, i) => {
      const y = TOP + i * ROW;
      const kind = SPAN_KINDS[s.name] || 'other';
      const bx = x(s.start_ms);
      const bw = Math.max(x(s.end_ms) - bx, 2);
      const error = s.attributes && s.attributes.error === true;
      const label = spanLabel(s);
      chart.append(svg('g', { class: 'span k-' + kind + (error ? ' is-error' : ''), 'data-name': String(s.name) },
        svg('title', null, spanDetails(s)),
        svg('text', { x: 6 + Math.min(depth, 6) * 12, y: y + 14, class: 'label' }, shorten(label, 48 - Math.min(depth, 6) * 2)),
        svg('rect', { x: bx.toFixed(1), y: y + 4, width: bw.toFixed(1), height: ROW - 8, rx: 2, class: 'bar' })));
    });
    const legend = el('ul', { class: 'legend' }, Object.entries({ task: 'task', segment: 'segment', llm: 'model call',
      tool: 'tool call', compaction: 'compaction' }).map(([k, v]) => el('li', { class: 'k-' + k }, v)),
    el('li', { class: 'is-error' }, 'error'));
    box.replaceChildren(chart, legend);
  }

  // ------------------------------------------------------------ schedules

  function schedulesPage(view) {
    const rowsBody = el('tbody');
    const table = el('table', { id: 'schedules-table', class: 'grid' },
      el('caption', { class: 'sr-only' }, 'Schedules'),
      el('thead', null, el('tr', null, ['Schedule', 'Expression', 'Kind', 'Agent', 'State', 'Next run', 'Last run',
        'Last task', 'Input', ''].map((h) => el('th', { scope: 'col' }, h)))),
      rowsBody);
    const empty = el('p', { class: 'empty', hidden: true }, 'No schedules.');
    view.append(el('h1', { tabindex: '-1' }, 'Schedules'), el('div', { class: 'scroll' }, table), empty);
    let shownKey = '';
    const refresh = every(SCHEDULES_REFRESH_MS, async (current) => {
      let data;
      try {
        data = await api('GET', '/schedules');
      } catch (e) {
        if (e.status === 501) {
          empty.hidden = false;
          empty.textContent = 'Schedules are not enabled on this deployment.';
          return false;
        }
        throw e;
      }
      if (!current()) return false;
      const list = (data && data.schedules) || [];
      const key = JSON.stringify(list);
      if (key !== shownKey) {
        shownKey = key;
        rowsBody.replaceChildren(...list.map((s) => scheduleRow(s, refresh)));
      }
      empty.hidden = list.length > 0;
      updated('Updated ' + clock(new Date()) + '.');
      return true;
    });
  }

  function scheduleRow(s, refresh) {
    const del = el('button', { type: 'button', class: 'deny small' }, 'Delete');
    del.setAttribute('aria-label', 'Delete schedule ' + s.schedule_id);
    del.addEventListener('click', async () => {
      if (!window.confirm('Delete schedule ' + s.schedule_id + '?')) return;
      del.disabled = true;
      try {
        await api('DELETE', '/schedules/' + enc(s.schedule_id));
        say('Schedule deleted.');
      } catch (e) {
        failed(e);
        del.disabled = false;
      }
      refresh();
    });
    const last = s.last_task_id ? el('a', { href: '#/tasks/' + enc(s.last_task_id) }, shorten(s.last_task_id, 13)) : '—';
    return el('tr', { 'data-schedule-id': String(s.schedule_id) },
      el('td', { class: 'id', title: String(s.schedule_id) }, shorten(String(s.schedule_id), 13)),
      el('td', null, el('code', null, String(s.expression)), ' ', String(s.timezone || '')),
      el('td', null, String(s.kind || '')),
      el('td', null, String(s.agent || 'default')),
      el('td', null, String(s.state || '')),
      el('td', null, s.next_fire_at ? when(s.next_fire_at) : '—'),
      el('td', null, s.last_fired_at ? when(s.last_fired_at) : '—'),
      el('td', { class: 'id' }, last),
      el('td', { class: 'input', title: String(s.input || '') }, shorten(s.input || '', 80)),
      el('td', null, del));
  }

  // ------------------------------------------------------------ start

  function start() {
    byId('signin-form').addEventListener('submit', signIn);
    byId('signout').addEventListener('click', () => signOut(''));
    window.addEventListener('hashchange', route);
    route();
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
